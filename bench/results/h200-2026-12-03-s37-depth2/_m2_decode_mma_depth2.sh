#!/usr/bin/env bash
# Prepared in session 36 (delete before merging, keep with the results): the Mamba-2 decode's
# tensor-core state-and-output stream (ReplayMmaStream::run, mamba2/replay_mma.cuh) with two state
# units in flight per warp instead of one, the L2 prefetch three tiles ahead instead of two, and
# the kMmaUpdate instances bounded at 6 CTAs per SM (kReplayMmaMinCtas, 80 registers) instead of 8
# (64). Why: at batch 256 the tensor-core non-flush step sits near 350 us at B = 8 and B = 16 alike
# (session 36, call 4), against output-only's 280 on the same bytes; output-only's stream gained
# 2.8 % from a second iteration of loads in flight (session 24). sm_90a: 80 registers, 8 bytes of
# spill (none at 64 with one unit); 5 CTAs (96 registers) spilled 20 bytes. The other 90 kernels
# of mamba2_replay_fp32.cu have the same SASS. Not run on a GPU.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry .whl, ab_base)
#   bash scripts/_m2_decode_mma_depth2.sh ab     # ~4 min: Mamba-2-only builds; state-and-output rows on the
#                                                # launcher's rule, batch 1-512, B = 16 / 32 (tensor cores at
#                                                # every batch there), and B = 8 batch 1 (one tile per CTA)
#   bash scripts/_m2_decode_mma_depth2.sh check  # ~9 min: every Mamba-2 GPU test, memcheck and racecheck
#                                                # of four tensor-core long runs
# Merge if the gates pass, the tests pass, the sanitizers are clean and the whole-head rows gain
# without batch 1 losing; then measure B = 8 with whole heads against the CUDA cores
# (REPLAYSSM_M2_DECODE_MMA=1 / 0), where the launcher keeps the CUDA cores today.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_decode_mma_depth2.sh ab|check"}
t0=$SECONDS
show() { grep -E 'm2_so|FAILED|rc=|built' "$1" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}'; grep '^gates:' "$1"; }
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1,8,64,256,512 -B 16,32 --budget-s 90 > "$OUT/ab_rule.txt" 2>&1
  show "$OUT/ab_rule.txt"
  echo "[$((SECONDS - t0)) s] ab, B = 16 / 32"
  AB_KEEP_BASE=1 OUT="$OUT/b8" BENCH_TIMEOUT=60 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1 -B 8 --budget-s 20 > "$OUT/ab_b8.txt" 2>&1
  show "$OUT/ab_b8.txt"
  echo "[$((SECONDS - t0)) s] ab, B = 8 batch 1"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* b8 | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log "$OUT/b8"
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
      tests/test_mamba2_cuda.py -k "(update_forms and tensor_cores and (p40 or super_b32)) or (launcher_choice and 2)" \
      > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  ;;
*) echo "unknown stage $stage (ab, check)" >&2; exit 2 ;;
esac
