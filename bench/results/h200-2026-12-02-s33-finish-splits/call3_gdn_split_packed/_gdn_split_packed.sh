#!/usr/bin/env bash
# Prepared in session 32 (delete before merging, keep with the results): the GDN kernels' fp32 ->
# bf16 operand splits read back from the packed word (split_bf16x2_packed / split_bf16x3_packed,
# common/mma_bf16.cuh) in the window kernel's staged products (gdn/window_mma.cuh), the tensor-core
# fold of the decode and spec flush rows (gdn/chunk_ops.cuh) and the register stream's window split
# (gdn/window_stream.cuh). Session 31's bf16-split-pack changed every caller, the Mamba-2 tensor-core
# stream (common/mma_state_stream.cuh) included: GDN -0.5 to -2.8 % at T = 4 / 8, Mamba-2 T = 8 +4 %
# at batch 1 / 8 (bench/results/h200-2026-12-02-s32-prepared/). This form leaves that stream, and so
# all Mamba-2 code and GDN's register-stream products, on the old splits. Same conversions and
# subtractions: results bit-identical (the A/B compares the gates' errors).
# Two stages, one device call each (the second needs the first's build, kept while the machine
# stays warm; it builds again otherwise):
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry .whl, ab_base)
#   bash scripts/_gdn_split_packed.sh ab      # ~5 min cold: GDN-only builds; A/B of the GDN decode
#                                             # section (classic step, decode cycle, flush step) and
#                                             # every GDN spec row, T = 1 / 2 / 4 / 8, batch 1-512,
#                                             # both geometries; bf16 checkpoint T = 4 / 8 at batch
#                                             # 64 / 256; gates compared
#   bash scripts/_gdn_split_packed.sh check   # ~8 min warm: every GDN GPU test, then memcheck and
#                                             # racecheck of the forms whose splits changed
# Merge if the gates' errors are identical, every test passes, the sanitizers are clean and the
# spec T = 4 / 8 rows and the flush step gain beyond the spread with no row losing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _gdn_split_packed.sh ab|check"}
t0=$SECONDS
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=200 bash scripts/ab_bench.sh --sections gdn,spec --geometries qwen3.5-4b,qwen3.5-122b \
    -B 16 --accept all --batches 1,8,64,256,512 --spec-tokens 1,2,4,8 > "$OUT/ab.txt" 2>&1
  grep -E '^gdn_|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -90
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab fp32"
  AB_KEEP_BASE=1 OUT="$OUT/bf16" BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections gdn,spec --geometries qwen3.5-4b \
    -B 16 --accept all --batches 64,256 --spec-tokens 4,8 --state-dtype bf16 > "$OUT/ab_bf16.txt" 2>&1
  grep -E '^gdn_|FAILED|rc=' "$OUT/ab_bf16.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}'
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
  # The staged products (pairs at T = 4, fp32 and bf16 checkpoints), the tensor-core folds of the
  # decode and the spec flush rows, and the register stream's window split (T = 8).
  SEL="(spec_long_run and pairs and (4-fp32-bf16 or 4-bf16-bf16)) or (decode_long_run and (fp32-bf16 or bf16-bf16))"
  SEL="$SEL or (spec_stream_forms and registers_4ctas and 16-12-8)"
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
