#!/usr/bin/env bash
# docs/prepared/m2-decode-index-before-wait.patch measured and checked. The Mamba-2 replay kernel
# (mamba2_decode, mamba2_flush) forms its index arithmetic and the step inputs' addresses before
# griddepcontrol.wait instead of after it (hold_before_wait in common/dependent_launch.cuh keeps
# them there), so that with programmatic dependent launch they overlap the previous grid's last
# wave. In the batch-1 instance (sm_90a, fp32 checkpoint, bf16 activations, N = 128) the wait moves
# from the 3rd to the 120th instruction and the first load from the 121st to the 133rd: ~117
# instructions (with an integer division) off the slot -> cursors -> entries chain of issue 3's
# batch-1 target (5.96 us against 4.6). Spills moved: the hot instances (the aligned entries-first
# one without the B copy, the stream-first ones, the tensor-core one) are unchanged; the B-copy
# aligned one (batch-1 output-only) goes from 8 / 8 to 4 / 20 bytes of spill stores / loads, some
# misaligned-view instances gain spills and others lose theirs. Results must stay bit-identical.
# Prepare where the git history is: scripts/ab_bench.sh --prepare HEAD; git apply
# docs/prepared/m2-decode-index-before-wait.patch; cp docs/prepared/m2-decode-index-before-wait.sh scripts/.
# Then on the GPU machine (carry .whl, ab_base), two calls:
#   MODE=ab bash scripts/m2-decode-index-before-wait.sh     # ~6 min: base and tree, both routes, B = 16,
#                                                           # batch 1 / 8 / 64 / 256, then batch 1 again
#                                                           # in two more processes of each
#   MODE=tests bash scripts/m2-decode-index-before-wait.sh  # ~7 min: the Mamba-2 decode tests, memcheck
# Merge if batch 1 gains (the cycle, in every process), the rest stays level, the gates match and the
# tests pass. Written in session 51 (no device lent); compile-checked for sm_90a.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
if [[ ${MODE:-ab} == ab ]]; then
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh --sections m2 --batches 1,8,64,256 -B 16 \
    --budget-s 45 > "$OUT/ab.txt" 2>&1
  echo "ab rc=$? [$((SECONDS - t0)) s]"; grep -E "m2_(oo|so)_cycle|m2_base|gates|differ" "$OUT/ab.txt" | head -40
  for round in 1 2; do
    for label in base tree; do
      dir=/tmp/replayssm_ab_base; [[ $label == tree ]] && dir=$PWD
      (cd "$dir" && timeout 60 python3 -m replayssm_ext.benchmark --sections m2 --batches 1 -B 16 --budget-s 20 \
        > "$OUT/b1_${round}_$label.log" 2>&1)
      echo "batch 1, round $round, $label rc=$? [$((SECONDS - t0)) s]"
      grep -E "^m2_(oo|so)_cycle |^m2_base " "$OUT/b1_${round}_$label.log" | awk '{print $1, $2, $3, $5}'
    done
  done
else
  OUT=$OUT STAGES=build BUILD_TIMEOUT=240 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
  echo "build [$((SECONDS - t0)) s]"
  timeout 300 python3 -m pytest -q -rs -n 14 -p no:cacheprovider tests/test_mamba2_cuda.py -k "not spec" \
    > "$OUT/test.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -2 "$OUT/test.log"
  OUT=$OUT STAGES=sanitize SANITIZE_TOOLS=memcheck SANITIZE_TIMEOUT=150 \
    SANITIZE_ARGS="tests/test_mamba2_cuda.py -x -k 'long_run_mixed_phases or aligned_and_misaligned or cuda_graph_replay'" \
    bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  echo "memcheck rc=$? [$((SECONDS - t0)) s]"; grep -E "memcheck" "$OUT/sanitize_run.log" | tail -2
fi
