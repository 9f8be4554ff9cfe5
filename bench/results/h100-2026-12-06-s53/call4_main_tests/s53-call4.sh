#!/usr/bin/env bash
# Session 53, GPU call 4, on main after the merge: build (Mamba-2 kernels), the Mamba-2 GPU tests,
# then memcheck and racecheck of the two new kernels' forms tests (both rows kernels forced).
# Run from the repository root: bash bench/results/h100-2026-12-06-s53/call4_main_tests/s53-call4.sh
source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
STAGES=build,test BUILD_TIMEOUT=200 TEST_TIMEOUT=200 PYTEST_ARGS="tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -n 14" \
  bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
echo "build+test rc=$? [$((SECONDS - t0)) s]"; grep -E "^== (build|test):" "$OUT/gpu_check.log"; tail -n 3 "$OUT/test.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or (update_rows_forms and nano and not general) or warp_rows_launcher'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -E "^== (memcheck|racecheck):" "$OUT/sanitize_run.log"
echo "sanitize [$((SECONDS - t0)) s]"
