#!/usr/bin/env bash
# Session 43, call 5: the final form of g in fp64 (one thread per (token, v-head), inputs requested
# beside the cursors; at T = 1 the head's dt_bias / A_log at the chain). A/B against main (ab_base)
# on the GDN decode, classic step and spec T = 1, 2, 4, 8 at batch 1 / 256 (Qwen3.5-4B), then every
# GDN GPU test, then racecheck on test_ring_g_rounded_once in the time left (carry .whl, ab_base).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections gdn,spec --geometries qwen3.5-4b -B 16 --spec-tokens 1,2,4,8 --accept all --spec-phases --batches 1,256 --budget-s 60"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-120
grep -E '^gdn_' "$OUT/ab.txt" | grep -E ' (1|256) ' | head -60
echo "[$((SECONDS - t0)) s] ab done"
tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
timeout 220 python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rs -n 14 -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
left=$((585 - SECONDS + t0))
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool racecheck --error-exitcode 97 --print-limit 20 \
  python3 -m pytest -q -p no:cacheprovider tests/test_gdn_cuda.py -k test_ring_g_rounded_once > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
