#!/usr/bin/env bash
# Prepared in session 32 (delete before merging, keep with the results): the GDN window kernel's
# partial-sum finish (finish_chunk, tensor-core instances: fp32 checkpoint T = 4 / 8 staged, bf16
# checkpoint T = 2-8) as a loop bounded at compile time. As `for (m = fin_m; m < kDots; m +=
# fin_step)` nvcc worked out the trip count at run time in every chunk and wrapped each output in a
# remainder loop and branches; the T = 4 pairs at K = 128 have exactly one output per thread per
# chunk. The same outputs in the same order: results bit-identical (the A/B compares the gates).
# Two stages, one device call each (the second needs the first's build, kept while the machine
# stays warm; it builds again otherwise):
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry .whl, ab_base)
#   bash scripts/_gdn_finish_bounded.sh ab      # ~5 min cold: GDN-only builds; A/B of every GDN spec
#                                               # row, T = 1 / 2 / 4 / 8, batch 1-512, both
#                                               # geometries; bf16 checkpoint T = 2 / 4 / 8 at batch
#                                               # 64 / 256; gates compared
#   bash scripts/_gdn_finish_bounded.sh check   # ~8 min warm: every GDN GPU test, then memcheck and
#                                               # racecheck of the tensor-core forms
# Merge if the gates' errors are identical, every test passes, the sanitizers are clean and the
# T = 4 rows gain beyond the spread with no row losing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _gdn_finish_bounded.sh ab|check"}
t0=$SECONDS
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b \
    -B 16 --accept all --batches 1,8,64,256,512 --spec-tokens 1,2,4,8 > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -50
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab fp32"
  AB_KEEP_BASE=1 OUT="$OUT/bf16" BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b \
    -B 16 --accept all --batches 64,256 --spec-tokens 2,4,8 --state-dtype bf16 > "$OUT/ab_bf16.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=' "$OUT/ab_bf16.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}'
  grep '^gates:' "$OUT/ab_bf16.txt"
  echo "[$((SECONDS - t0)) s] ab bf16"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* bf16 | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log "$OUT/bf16"
  ;;
check)
  if ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
    timeout 240 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
  fi
  timeout 240 python3 -m pytest -q -rs -n 14 tests/test_gdn_cuda.py tests/test_gdn_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  left=$((560 - (SECONDS - t0)))
  # The tensor-core forms that finish partial sums: the T = 4 pairs (fp32 checkpoint), the bf16
  # checkpoint at T = 2 / 4, and the staged stream at T = 8.
  SEL="(spec_long_run and pairs and (4-fp32-bf16 or 2-bf16-bf16 or 4-bf16-bf16)) or (spec_stream_forms and stages and 16-12-8)"
  for tool in memcheck racecheck; do
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -v -p no:cacheprovider \
      tests/test_gdn_cuda.py -k "$SEL" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
  ;;
*) echo "unknown stage $stage (ab, check)" >&2; exit 2 ;;
esac
