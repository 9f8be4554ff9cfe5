#!/usr/bin/env bash
# Session 20 (delete before merging): the GDN register stream's 5-CTA instance as the launcher's
# choice on grids of kRegAltMinWaves waves and more.
#   bash scripts/_s20_check.sh suite   # whole build; 4 / 5 / launcher around the threshold (T = 8); whole GPU suite
#   bash scripts/_s20_check.sh san     # same machine, warm: memcheck + racecheck on the 5-CTA stream forms
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
bench() {  # $1 log name, then benchmark arguments
  local name=$1; shift
  timeout 60 python3 -m replayssm_ext.benchmark --sections spec -B 16 --accept all --out "$OUT/b_$name" "$@" > "$OUT/b_$name.log" 2>&1
  echo "$name: $(grep -E '\] gdn_spec_cycle' "$OUT/b_$name.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
  rm -rf "$OUT/b_$name"
}
if [[ ${1:-} == suite ]]; then
  timeout 200 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] built"
  # Waves of 4 CTAs per SM at T = 8 (one 128-row tile per v-head): Qwen3.5-4B (32 v-heads) batch 64 3.9,
  # 80 4.8, 96 5.8, 128 7.8, 160 9.7; Qwen3.5-122B (64 v-heads) half the batch for the same waves.
  for ctas in 4 5 launcher; do
    [[ $ctas == launcher ]] && unset REPLAYSSM_GDN_SPEC_REG_CTAS || export REPLAYSSM_GDN_SPEC_REG_CTAS=$ctas
    bench ${ctas}_4b --geometries qwen3.5-4b --batches 64,80,96,128,160,256 --spec-tokens 8
    bench ${ctas}_122b --geometries qwen3.5-122b --batches 32,40,48,64,256 --spec-tokens 8
  done
  unset REPLAYSSM_GDN_SPEC_REG_CTAS
  echo "[$((SECONDS - t0)) s] bench"
  tar czf "$OUT/bench.tgz" -C "$OUT" $(cd "$OUT" && ls b_*.log) && rm -f "$OUT"/b_*.log
  timeout 310 python3 -m pytest -q -n 16 tests > "$OUT/tests.log" 2>&1; tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] suite"
else
  timeout 200 python3 setup.py build_ext --inplace > "$OUT/build2.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build2.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] rebuilt"
  bench launcher2_4b --geometries qwen3.5-4b --batches 64,72,80,96 --spec-tokens 8
  bench launcher2_122b --geometries qwen3.5-122b --batches 32,36,40,48 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_REG_CTAS=5 bench 5b_4b --geometries qwen3.5-4b --batches 72 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_REG_CTAS=4 bench 4b_4b --geometries qwen3.5-4b --batches 72 --spec-tokens 8
  tar czf "$OUT/bench2.tgz" -C "$OUT" $(cd "$OUT" && ls b_*.log) && rm -f "$OUT"/b_*.log
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -v -x -p no:cacheprovider \
    tests/test_gdn_cuda.py -k "stream_forms and 5ctas and (geo2 or geo4 or geo5)" > "$OUT/san_memcheck.log" 2>&1
  echo "memcheck rc=$? $(grep -cE 'PASSED' "$OUT/san_memcheck.log") passed; $(grep -E 'ERROR SUMMARY|FAILED|Invalid' "$OUT/san_memcheck.log" | head -3 | tr '\n' ' ')"
  echo "[$((SECONDS - t0)) s] memcheck"
  timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 python3 -m pytest -v -x -p no:cacheprovider \
    tests/test_gdn_cuda.py -k "stream_forms and 5ctas and (geo0 or geo5)" > "$OUT/san_racecheck.log" 2>&1
  echo "racecheck rc=$? $(grep -cE 'PASSED' "$OUT/san_racecheck.log") passed; $(grep -E 'RACECHECK SUMMARY|FAILED' "$OUT/san_racecheck.log" | head -3 | tr '\n' ' ')"
  echo "[$((SECONDS - t0)) s] racecheck"
fi
