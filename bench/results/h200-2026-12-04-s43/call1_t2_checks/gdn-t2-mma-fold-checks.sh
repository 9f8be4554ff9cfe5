#!/usr/bin/env bash
# What session 42 could not finish for its merged GDN 2-token tensor-core fold (6341497), in one
# call (carry .whl): every GDN GPU test on main as merged (g in fp32: the strict xfail of
# test_spec_mma_fold_t2's K = 64 cases must hold in both head forms), then racecheck on
# test_spec_mma_fold_t2 (session 42's call 4 ran out of time in it; memcheck was clean).
#   cp docs/prepared/gdn-t2-mma-fold-checks.sh scripts/ && bash scripts/gdn-t2-mma-fold-checks.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
STAGES=build,test PYTEST_ARGS="tests/test_gdn_cuda.py tests/test_gdn_ops.py -rxXs -n 14" TEST_TIMEOUT=240 \
  timeout 400 bash scripts/gpu_check.sh > "$OUT/check_run.log" 2>&1
echo "build + tests [$((SECONDS - t0)) s]"; grep -E "^(build|test) " "$OUT/check_run.log"; grep -E "XFAIL|XPASS|FAILED" "$OUT/test.log" | head
left=$((585 - SECONDS + t0))
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool racecheck --error-exitcode 97 --print-limit 20 \
  python3 -m pytest -q -p no:cacheprovider tests/test_gdn_cuda.py -k test_spec_mma_fold_t2 > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
