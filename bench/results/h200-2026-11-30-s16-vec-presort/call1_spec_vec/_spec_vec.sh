#!/usr/bin/env bash
# Prepared in session 15 (not run; delete before merging): the aligned-view spec instance
# (kVecStream, REPLAYSSM_M2_SPEC_VEC). One build; the variant is a launch choice, so the
# benchmark processes alternate off (0), the launcher's rule (unset) and forced on (1), then the
# full suite and the sanitizers on the new tests. ~9 min with the build.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"; W=/tmp/specvec; mkdir -p $W/m2 $W/fp16
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > $W/build.log 2>&1 || { tail -40 $W/build.log; exit 1; }
echo "build $((SECONDS - t0)) s"
M2="--sections spec --accept all -B 16 --geometries nemotron3-nano-4b,nemotron3-super-120b"
for round in 1 2; do
  for v in 0 rule 1; do
    if [[ $v == rule ]]; then e=(env -u REPLAYSSM_M2_SPEC_VEC); else e=(env REPLAYSSM_M2_SPEC_VEC=$v); fi
    "${e[@]}" timeout 100 python3 bench/bench_spec.py $M2 --batches 1,64,128,256,512 --spec-tokens 4 > $W/m2/${v}_$round.log 2>&1
    "${e[@]}" timeout 60 python3 bench/bench_spec.py $M2 --batches 256 --spec-tokens 4 --act-dtype fp16 > $W/fp16/${v}_$round.log 2>&1
  done
  echo "[$((SECONDS - t0)) s] round $round"
done
tar czf $OUT/spec_vec_bench.tgz -C $W .
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x tests/test_mamba2_cuda.py \
    -k "test_spec_vec_stream_forms and geo3 or test_spec_vec_stream_override_errors" > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $OUT/san_$tool.log | tr '\n' ' ')"
done
