#!/usr/bin/env bash
# docs/prepared/gdn-rows-early-inputs.patch (session 56): one GPU call from the repository root of
# main, with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/gdn-rows-early-inputs.sh
# It applies the patch; A/B of the tree against main, GDN decode section (the decode, its flush
# step and the classic state update, all rows-kernel launches), Qwen3.5-4B and 122B, batch 1 / 8 /
# 256, B = 16; the GDN decode / state-update / flush GPU tests; memcheck of the decode long runs.
# ~8 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git apply --check docs/prepared/gdn-rows-early-inputs.patch 2>/dev/null && git apply docs/prepared/gdn-rows-early-inputs.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
BUILD_TIMEOUT=250 BENCH_TIMEOUT=120 scripts/ab_bench.sh --sections gdn --geometries qwen3.5-4b,qwen3.5-122b \
  -B 16 --batches 1,8,256 --budget-s 25 > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-200
sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -E "^gdn_" | head -40
echo "ab [$SECONDS s]"
timeout 200 python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rf -n 14 -p no:cacheprovider \
  -k "not spec" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$SECONDS s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 97 \
  --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py -k "test_decode_long_run" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? [$SECONDS s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
