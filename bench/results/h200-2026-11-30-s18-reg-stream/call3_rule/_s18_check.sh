export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 200 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { echo build FAILED; tail -30 $OUT/build.log; exit 1; }
echo "[$((SECONDS-t0)) s] built"
for r in d 0; do
  if [ $r = d ]; then unset REPLAYSSM_GDN_SPEC_REGS; else export REPLAYSSM_GDN_SPEC_REGS=0; fi
  timeout 60 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b,qwen3.5-122b --batches 1,4,8,64,256 -B 16 --spec-tokens 4,8 --accept all --out $OUT/b_$r > $OUT/b_$r.log 2>&1
  echo "regs=$r: $(grep -E '\] gdn_spec_cycle' $OUT/b_$r.log | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
done
unset REPLAYSSM_GDN_SPEC_REGS
echo "[$((SECONDS-t0)) s] bench"
timeout 370 python3 -m pytest -q -n 16 tests > $OUT/tests.log 2>&1; tail -4 $OUT/tests.log
echo "[$((SECONDS-t0)) s] suite"
rm -rf $OUT/b_d $OUT/b_0
