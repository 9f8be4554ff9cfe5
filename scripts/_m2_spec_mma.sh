#!/usr/bin/env bash
# For the session that measures wip/m2-spec-mma (compiled for sm_90a, not run): the Mamba-2 spec
# verify's state stream on tensor cores (spec_mma.cuh) against the CUDA-core stream, one build:
# REPLAYSSM_M2_SPEC_MMA=0 forces the CUDA cores, unset takes the tensor cores where they run (fp32
# checkpoint, bf16 activations, T >= 3). Then the Mamba-2 GPU tests (test_spec_stream_forms forces
# each stream against the recurrence) and memcheck / racecheck on two tensor-core cases. Delete
# before merging; on a merge, the perf-notes Mamba-2 spec section and the README table need the
# numbers, and spec_min_ctas may want its own value for the kMma instances (ptxas: T = 4 at 80
# registers, pairs spill 12 bytes outside the stream loop; T = 8 at 94-95 registers, no spill).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 REPLAYSSM_FAMILIES=mamba2 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
t0=$SECONDS; timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo build failed; tail -30 "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"; rm -f "$OUT/build.log"
G=tests/test_mamba2_cuda.py
timeout 150 python3 -m pytest -q -p no:cacheprovider -x "$G" -k "spec_stream" -n 14 > "$OUT/test_stream.log" 2>&1
echo "stream tests rc=$?: $(tail -1 "$OUT/test_stream.log")"; grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/test_stream.log" | head -20
ARGS="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b --batches 1,64,256 -B 16 --spec-tokens 4,8 --accept all --budget-s 30"
for mma in 0 auto; do
  if [[ $mma == auto ]]; then unset REPLAYSSM_M2_SPEC_MMA; else export REPLAYSSM_M2_SPEC_MMA=$mma; fi
  timeout 100 python3 -m replayssm_ext.benchmark $ARGS --out "$OUT/mma_$mma" > "$OUT/mma_$mma.log" 2>&1; echo "mma $mma rc=$?"
  rm -f "$OUT/mma_$mma"/*.png; grep m2_spec_cycle "$OUT/mma_$mma/table.txt"
done
unset REPLAYSSM_M2_SPEC_MMA
timeout 200 python3 -m pytest -q -p no:cacheprovider "$G" tests/test_mamba2_ops.py -n 14 > "$OUT/test.log" 2>&1
echo "mamba2 tests rc=$?: $(tail -1 "$OUT/test.log")"; grep -E "^(FAILED|ERROR)" "$OUT/test.log" | head
for tool in memcheck racecheck; do
  REPLAYSSM_M2_SPEC_MMA=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -p no:cacheprovider -p no:xdist "$G::test_spec_stream_forms[launcher-mma-geo2-32-4-6]" \
    "$G::test_spec_stream_forms[pairs-mma-geo0-16-4-3]" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
done
