#!/usr/bin/env bash
# Session 16, temporary: the merged tree (Mamba-2 only): build, Mamba-2 GPU tests, sanitizers on the
# T = 4 spec paths (aligned-view instance and the misaligned element-wise one), the spec table.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"; W=/tmp/s16final; mkdir -p $W
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > $W/build.log 2>&1 || { tail -40 $W/build.log; exit 1; }
echo "[$((SECONDS - t0)) s] built"
timeout 240 python3 -m pytest -q -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > $W/tests.log 2>&1; tail -2 $W/tests.log
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x tests/test_mamba2_cuda.py \
    -k "test_spec_vec_stream_forms and geo0 or test_spec_long_run and 16-4" > $W/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $W/san_$tool.log | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
timeout 170 python3 bench/bench_spec.py --sections spec,plan -B 16 --geometries nemotron3-nano-4b,nemotron3-super-120b \
  --batches 1,64,256,512 --out $W/spec > $W/spec.log 2>&1; echo "bench rc=$?"
echo "[$((SECONDS - t0)) s] bench"
tar czf $OUT/s16_final.tgz -C $W .
