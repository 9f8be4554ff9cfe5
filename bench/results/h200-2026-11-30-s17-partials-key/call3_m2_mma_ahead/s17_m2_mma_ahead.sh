#!/usr/bin/env bash
# Session 17 (delete before merging): the tensor-core spec stream with two units in flight
# (SpecMmaStream::InFlight) against main, same run (scripts/ab_bench.sh, Mamba-2 only), then the
# Mamba-2 GPU tests and memcheck on the tensor-core stream's forms.
#   here:  scripts/ab_bench.sh --prepare HEAD   (carry ab_base and .whl)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
bash scripts/ab_bench.sh --sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b --batches 1,64,256,512 \
  -B 16 --spec-tokens 4,5,8 --accept all 2>&1 | grep -E "built|rc=|FAILED|m2_spec_cycle|d2d_copy_kernel|tree/base"
echo "[$((SECONDS - t0)) s] A/B"
timeout 200 python3 -m pytest -q -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1; tail -2 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -x tests/test_mamba2_cuda.py \
  -k "(test_spec_stream_forms and mma) or test_spec_stream_quads" > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/san_memcheck.log" | tr '\n' ' ')"
echo "[$((SECONDS - t0)) s] done"
