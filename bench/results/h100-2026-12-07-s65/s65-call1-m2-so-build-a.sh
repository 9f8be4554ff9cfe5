#!/usr/bin/env bash
# docs/prepared/m2-so-build-a.patch (session 64): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/m2-so-build-a.sh
# It applies the patch (the state-and-output route's A fragments built with k-steps outside the
# tiles, the weights and x rows set up once per k-step, the packed splits, and two terms where the
# tile is not stored: session 63's ncu source counters at 80 SMs put that build at ~17 % of the
# non-flush step's instructions, ~66 SASS per block and thread), then, against main (ab_bench): all
# SMs at batch 1 / 256, B = 16 / 32; 96 SMs at batch 256, B = 16 / 32; 80 SMs at batch 256, B = 16.
# On an H200 the whole device twice instead, both routes (the target's ratio). The words are the
# same bit for bit, so the gates' errors must be identical in every pair. Then the Mamba-2 GPU
# tests, and racecheck on the tensor-core update's tests where time is left. ~8-9 minutes.
# QUICK=1: batch 256 only, no racecheck, ~6.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/m2-so-build-a.patch 2>/dev/null && git apply docs/prepared/m2-so-build-a.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
m2_so_ab_sweep  # scripts/device_env.sh
# The tests run on the tree's in-place build, which ab_bench made: the whole Mamba-2 GPU file (every
# state-and-output form: flush rows' three terms, B = 32's two k-steps, split P at small batch).
timeout $((500 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider \
  > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
if [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py \
    -k "test_decode_update_tensor_cores_steep_decay or (test_decode_update_forms and tensor_cores_nine and (nano or super))" \
    > "$ROOT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$ROOT/racecheck.log"
fi
cd "$ROOT" && dirs=$(ls -d all all2 sms96 sms80 2>/dev/null) && tar -czf runs.tgz --exclude='*.png' $dirs && rm -rf $dirs
