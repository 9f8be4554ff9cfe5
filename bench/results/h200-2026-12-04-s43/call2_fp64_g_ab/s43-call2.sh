#!/usr/bin/env bash
# Session 43, calls 2-4: g in fp64 computed by one thread per (token, v-head) from gate inputs loaded
# beside the cursors. A/B against main (ab_base) on the GDN decode, classic step and spec T = 1, 2,
# 4, 8 at batch 1 / 256 (Qwen3.5-4B), then the new exact ring_g test and the formerly xfailed K = 64
# fold case (carry .whl, ab_base).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections gdn,spec --geometries qwen3.5-4b -B 16 --spec-tokens 1,2,4,8 --accept all --spec-phases --batches 1,256 --budget-s 60"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=130 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
grep -E '^gdn_' "$OUT/ab.txt" | head -60
echo "[$((SECONDS - t0)) s] ab done"
tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
left=$((580 - SECONDS + t0))
timeout $left python3 -m pytest tests/test_gdn_cuda.py -q -rs -n 14 -p no:cacheprovider \
  -k "test_ring_g_rounded_once or test_spec_mma_fold_t2" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|passed|failed" "$OUT/tests.log" | head -20
