#!/usr/bin/env bash
# wip/m2-spec-mma, second call: the tensor-core stream only at the 8-token window tile (T = 5..8).
# Build, the Mamba-2 GPU tests, memcheck / racecheck on two tensor-core cases, then the spec bench
# (auto vs forced CUDA cores) at T = 4, 5, 8. Delete before merging.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 REPLAYSSM_FAMILIES=mamba2 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
t0=$SECONDS; timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo build failed; tail -30 "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"; rm -f "$OUT/build.log"
G=tests/test_mamba2_cuda.py
timeout 200 python3 -m pytest -q -p no:cacheprovider "$G" tests/test_mamba2_ops.py -n 14 > "$OUT/test.log" 2>&1
echo "mamba2 tests rc=$?: $(tail -1 "$OUT/test.log")"; grep -E "^(FAILED|ERROR)" "$OUT/test.log" | head
ARGS="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b --batches 1,64,256,512 -B 16 --accept all --budget-s 30"
for mma in 0 auto; do
  if [[ $mma == auto ]]; then unset REPLAYSSM_M2_SPEC_MMA; else export REPLAYSSM_M2_SPEC_MMA=$mma; fi
  timeout 100 python3 -m replayssm_ext.benchmark $ARGS --spec-tokens 4,5,8 --out "$OUT/mma_$mma" > "$OUT/mma_$mma.log" 2>&1; echo "mma $mma rc=$?"
  rm -f "$OUT/mma_$mma"/*.png; grep m2_spec_cycle "$OUT/mma_$mma/table.txt"
done
unset REPLAYSSM_M2_SPEC_MMA
for tool in memcheck racecheck; do
  REPLAYSSM_M2_SPEC_MMA=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -p no:cacheprovider -p no:xdist "$G::test_spec_stream_forms[launcher-mma-geo2-32-5-6]" \
    "$G::test_spec_stream_forms[pairs-mma-geo0-16-6-3]" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$?: $(tail -1 "$OUT/san_$tool.log"); $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
done
