#!/usr/bin/env bash
# Session 44, call 1: the T = 8 gate warp's first token requested before g's fp64 chain. A/B against
# main b62c221 (ab_base) on the GDN spec verify, T = 1, 2, 4, 8, batch 1 / 256 / 512 (Qwen3.5-4B;
# the T = 8 rows are the ones the change touches), then racecheck on the last two cases of
# test_spec_mma_fold_t2 (session 43's racecheck ran 6 of its 7) in the time left (carry .whl, ab_base).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections spec --geometries qwen3.5-4b -B 16 --spec-tokens 1,2,4,8 --accept all --spec-phases --batches 1,256,512 --budget-s 60"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=110 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-120
grep -E '^gdn_' "$OUT/ab.txt" | head -70
echo "[$((SECONDS - t0)) s] ab done"
tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
python3 -m pytest --collect-only -q -p no:cacheprovider tests/test_gdn_cuda.py -k test_spec_mma_fold_t2 2>/dev/null |
  grep '::' > "$OUT/fold_t2_ids.txt"
cat "$OUT/fold_t2_ids.txt"
left=$((585 - SECONDS + t0))
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool racecheck --error-exitcode 97 --print-limit 20 \
  python3 -m pytest -q -rs -p no:cacheprovider $(tail -n 2 "$OUT/fold_t2_ids.txt") > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed|skipped" "$OUT/racecheck.log"
