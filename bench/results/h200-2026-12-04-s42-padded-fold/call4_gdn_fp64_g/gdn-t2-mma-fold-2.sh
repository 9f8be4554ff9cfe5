#!/usr/bin/env bash
# Second call for the GDN 2-token tile's tensor-core fold, with g (token_log_decay) now in fp64:
# A/B against main (ab_base) on the GDN decode and spec T = 2 / 4 at batch 1 / 256, every GDN test,
# then memcheck and racecheck on test_spec_mma_fold_t2 in the time left (carry .whl, ab_base).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections gdn,spec --geometries qwen3.5-4b -B 16 --spec-tokens 2,4 --accept all --spec-phases --batches 1,256 --budget-s 40"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
grep -E '^gdn_' "$OUT/ab.txt" | grep -vE 'snap|state_update' | head -40
echo "[$((SECONDS - t0)) s] ab done"
tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
timeout 210 python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rs -n 14 -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 3 "$OUT/tests.log"
left=$((585 - SECONDS + t0)); per=$((left / 2))
for tool in memcheck racecheck; do
  echo "==== $tool (timeout $per s)" >> "$OUT/sanitize.log"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $per compute-sanitizer --tool $tool --error-exitcode 97 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider tests/test_gdn_cuda.py -k test_spec_mma_fold_t2 >> "$OUT/sanitize.log" 2>&1
  echo "$tool rc=$? [$((SECONDS - t0)) s]"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize.log"
