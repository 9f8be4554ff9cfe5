#!/usr/bin/env bash
# Prepared in session 27 (delete before merging, keep with the results): the Mamba-2 spec verify's
# remaining short prologue loops (the window deltas' staging and ring write, the decay weights
# fold_w / c1 / w_ik) kept rolled through strided_for, and the weights' sum_entries rolled, on the
# instances where that costs no registers (tensor-core stream; CUDA-core 2- and 4-token tiles, sums
# at 4 only). Session 27 merged the first round of this (T = 4 super 454.3 -> 432.8 us; nano's flush
# launch stall_no_inst 12.2 -> 5.5 %). Local sm_90a compiles against aa2a1d8: nano / super T = 4
# pair instances 4600 / 4488 -> 4048 / 4088 SASS instructions, T = 8 tensor-core 4928 / 4824 ->
# 4296 / 4352 (quads / pairs), T = 2 pairs 3968 / 4104 -> 3664 / 3856; stream loops unchanged; the
# benchmarked instances spill nothing; the decode's SASS identical (mamba2_replay_fp32.cu).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_compact_weights.sh ab     # ~6 min: spec A/B, a second tree process, the Mamba-2 tests
#   bash scripts/_compact_weights.sh san    # same warm machine, <= 5 min: memcheck and racecheck
# Merge if no row loses beyond the spread and T = 4 or T = 8 gains in both processes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
case ${1:?ab or san} in
ab)
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
  echo "[$((SECONDS - t0)) s] ab"
  timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 8,256,512 --spec-tokens 4,8 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
  grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -14
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
  timeout 220 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -4 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
san)
  [[ -n $(ls replayssm_ext/*.so 2>/dev/null) ]] || { echo "no tree build in place: the machine was not warm"; exit 1; }
  # Side by side, one process each: one after the other, session 27's ran past 80 s each.
  for tool in memcheck racecheck; do
    timeout 290 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "spec_dtype_pairs or aligned_and_misaligned" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log
  ;;
esac
