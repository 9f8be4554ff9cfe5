#!/usr/bin/env bash
# Session 43, call 6: the sanitizers left open for the GDN kernels with g in fp64: memcheck on
# test_ring_g_rounded_once, then racecheck on test_spec_mma_fold_t2 (session 42's merged 2-token
# tensor-core fold, whose racecheck did not finish then) in the time left (carry .whl).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS; TOTAL_S=${TOTAL_S:-440}
STAGES=build BUILD_TIMEOUT=200 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
echo "build [$((SECONDS - t0)) s]"; grep -E "^== build" "$OUT/build_run.log"
for spec in "memcheck test_ring_g_rounded_once" "racecheck test_spec_mma_fold_t2"; do
  set -- $spec
  left=$((TOTAL_S - SECONDS + t0))
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool $1 --error-exitcode 97 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider tests/test_gdn_cuda.py -k $2 > "$OUT/$1.log" 2>&1
  echo "$1 $2 rc=$? [$((SECONDS - t0)) s]"; grep -E "SUMMARY|passed|failed" "$OUT/$1.log"
done
