#!/usr/bin/env bash
# Session 56, call 2: the GDN window kernel's T = 2 / 4 token inputs requested beside the cursors
# (the working tree) against main e318762 (ab_base, `scripts/ab_bench.sh --prepare HEAD`; carry
# ".whl" and "ab_base"); then the GDN spec GPU tests and memcheck of the T = 2 / 4 long runs.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
args="--sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --spec-tokens 2,4 --accept all,mean2.5 --spec-phases --batches 1,8,256,512 --budget-s 60"
BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-200
grep -E '^gdn_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | grep -E ' all ' | grep -v '122b.* 8 '
grep -E '^gdn_spec_cycle ' "$OUT/ab.txt" | grep -E ' mean2.5 '
echo "ab [$SECONDS s]"
timeout 150 python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -k "spec" -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$SECONDS s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((570 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 97 \
  --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
  -k "test_spec_long_run or test_spec_matches_cpu_op" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? [$SECONDS s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
