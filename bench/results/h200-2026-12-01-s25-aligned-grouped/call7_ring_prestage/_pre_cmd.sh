export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 200 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
echo "[$((SECONDS-t0)) s] built"
A=(--sections m2 --geometries nemotron3-nano-4b -B 16 --batches 1,8 --routes output_only,state_and_output)
for v in 0 1 0 1; do
  REPLAYSSM_M2_RING_PRESTAGE=$v timeout 40 python3 -m replayssm_ext.benchmark "${A[@]}" --out $OUT/p$v > $OUT/p$v.log 2>&1
  echo "prestage=$v"; grep -E '\] m2_(oo|so)_(cycle|nonflush) ' $OUT/p$v.log | cut -c10-95
  echo "[$((SECONDS-t0)) s]"
done
timeout 60 python3 -m pytest -q -x tests/test_mamba2_cuda.py -k "ring_prestage" 2>&1 | tail -3
echo "[$((SECONDS-t0)) s] tests"
