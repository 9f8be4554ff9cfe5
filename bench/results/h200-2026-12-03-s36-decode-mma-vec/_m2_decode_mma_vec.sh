#!/usr/bin/env bash
# Session 36's stage script, run from scripts/ (kept here with its results; README.md says which
# call ran which stage and against which base). Written in session 35 with its prepared patch
# (m2-decode-mma-vec-loads.patch, here): the Mamba-2 decode's tensor-core state-and-output update
# with 16-byte lane loads and stores. Session 36 ran `ab` with ab_base = main e1f418f (call 1), then
# with ab_base = main + the patch against the tree with B_j staged by 16-byte cp.async and two
# bf16 terms on non-flush rows (call 2, the rule's run widened to B = 16 / 32, batch 1-512), then
# `check` (call 3). The `bench` stage was cut to fit the budget: call 4 ran its commands by hand
# with smaller budgets (README.md).
#   scripts/ab_bench.sh --prepare <base>      # before the first call (carry .whl, ab_base)
#   bash scripts/_m2_decode_mma_vec.sh ab     # A/B with the tensor cores forced in both, then both on the rule
#   bash scripts/_m2_decode_mma_vec.sh check  # every Mamba-2 GPU test, memcheck and racecheck of four
#                                             # tensor-core long runs
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_decode_mma_vec.sh ab|check"}
t0=$SECONDS
show() { grep -E 'm2_so|FAILED|rc=|built' "$1" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}'; grep '^gates:' "$1"; }
case $stage in
ab)
  REPLAYSSM_M2_DECODE_MMA=1 BUILD_TIMEOUT=240 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections m2 \
    --routes state_and_output --batches 1,8,64,256,512 -B 16,32 --budget-s 90 > "$OUT/ab_forced.txt" 2>&1
  show "$OUT/ab_forced.txt"
  echo "[$((SECONDS - t0)) s] ab, tensor cores forced"
  AB_KEEP_BASE=1 OUT="$OUT/rule" BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1,8,64,256,512 -B 16,32 --budget-s 90 > "$OUT/ab_rule.txt" 2>&1
  show "$OUT/ab_rule.txt"
  echo "[$((SECONDS - t0)) s] ab, the launcher's rule"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* rule | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log "$OUT/rule"
  ;;
check)
  if ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
    timeout 240 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
  fi
  timeout 220 python3 -m pytest -q -rs -n 14 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  left=$((560 - (SECONDS - t0)))
  for tool in memcheck racecheck; do
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -v -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "(update_forms and tensor_cores and (p40 or super_b32)) or (launcher_choice and 2)" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  ;;
bench)
  # The m2 section on the launcher's rule (both routes, B = 8 / 16 / 32, batch 1-512), then the
  # state-and-output route with the CUDA-core update forced at B = 8 (the ring length the A/B did
  # not cover) beside the rule's rows of the same process run.
  if ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
    timeout 240 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
  fi
  timeout 150 python3 -m replayssm_ext.benchmark --sections m2 --batches 1,64,256,512 -B 8,16,32 --budget-s 120 \
    --out "$OUT/m2_rule" > "$OUT/m2_rule.log" 2>&1; echo "rule rc=$?"
  echo "[$((SECONDS - t0)) s] m2 section"
  for mma in 0 1; do
    REPLAYSSM_M2_DECODE_MMA=$mma timeout 75 python3 -m replayssm_ext.benchmark --sections m2 --routes state_and_output \
      --batches 1,8,64,256 -B 8 --budget-s 40 --out "$OUT/b8_mma$mma" > "$OUT/b8_mma$mma.log" 2>&1; echo "B = 8 mma=$mma rc=$?"
  done
  grep -hE 'm2_so_cycle' "$OUT"/b8_mma*/table.txt
  echo "[$((SECONDS - t0)) s] B = 8"
  ;;
*) echo "unknown stage $stage (ab, check, bench)" >&2; exit 2 ;;
esac
