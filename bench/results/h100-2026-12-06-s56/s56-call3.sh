#!/usr/bin/env bash
# Session 56, call 3: the working tree of call 2 (T = 2 / 4 token inputs beside the cursors) built
# alone, the GDN spec GPU tests to the end (call 2's 150 s limit stopped them at 96 %, none failed),
# then memcheck of the T = 2 / 4 long runs (call 2's ran out of time with no error reported).
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
OUT=$OUT STAGES=build BUILD_TIMEOUT=250 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
echo "build [$SECONDS s]"; grep -E "^== build" "$OUT/build_run.log"
timeout 230 python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -k "spec" -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$SECONDS s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 97 \
  --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
  -k "test_spec_long_run and (4-fp32-bf16 or 2-fp16-fp16 or 4-bf16-bf16)" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? [$SECONDS s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
