#!/usr/bin/env bash
# Session 55, GPU call 2: the warp-rows kernel with the token-b and copies-first patches (docs/prepared of session 54): the Mamba-2 GPU tests,
# memcheck / racecheck of the warp-rows tests, and the decode table at batch 1 / 256, B = 16.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
STAGES=build,test BUILD_TIMEOUT=200 TEST_TIMEOUT=200 PYTEST_ARGS="tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -n 14" \
  bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
echo "build+test rc=$? [$((SECONDS - t0)) s]"; grep -E "^== (build|test):" "$OUT/gpu_check.log"; tail -n 3 "$OUT/test.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings or warp_rows_launcher'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -E "^== (memcheck|racecheck):" "$OUT/sanitize_run.log"
echo "sanitize [$((SECONDS - t0)) s]"
timeout 120 python3 -m replayssm_ext.benchmark --sections m2 --batches 1,256 -B 16 --budget-s 60 --out "$OUT/table" > "$OUT/m2.log" 2>&1
echo "table rc=$? [$((SECONDS - t0)) s]"; grep -E "m2_|d2d|commit" "$OUT/m2.log" | head -30
