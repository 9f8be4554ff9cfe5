#!/usr/bin/env bash
# docs/prepared/m2-classic-aligned.patch measured and checked. The classic Mamba-2 step
# (mamba2_state_update, our baseline, and its per-draft snapshot form) gets an instance for 16-byte
# aligned fp32 state views, without the run-time alignment test and the element-wise fallback
# beside each state load and store, as the replay kernel's aligned-view instances (which gained
# 2.5-5 % on the state-and-output route in session 25); bounded at 7 CTAs per SM, the occupancy of
# the other instance (68 registers, no spill, sm_90a). The baseline only gets faster or stays: the
# replay routes' ratios to it may drop, and that is what they should be measured against.
# Prepare where the git history is: scripts/ab_bench.sh --prepare HEAD; git apply
# docs/prepared/m2-classic-aligned.patch; cp docs/prepared/m2-classic-aligned.sh scripts/.
# Then on the GPU machine (carry .whl, ab_base), two calls:
#   MODE=ab bash scripts/m2-classic-aligned.sh     # ~6 min: base and tree built in one call, the m2
#                                                  # section's classic step and output-only route
#                                                  # (the control: unchanged code) at batch 1 / 64 /
#                                                  # 256 / 512, B = 16, then the spec baseline (per-
#                                                  # draft snapshots) at T = 4, batch 1 / 256
#   MODE=tests bash scripts/m2-classic-aligned.sh  # ~4 min: the classic step's tests, memcheck
# Merge if the classic rows gain or stay level and the tests and memcheck pass; else drop it with its
# numbers. Written in session 51 (no device lent); compile-checked for sm_90a.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
if [[ ${MODE:-ab} == ab ]]; then
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=110 bash scripts/ab_bench.sh --sections m2 --routes output_only \
    --batches 1,64,256,512 -B 16 --budget-s 45 > "$OUT/ab.txt" 2>&1
  echo "ab rc=$? [$((SECONDS - t0)) s]"; grep -E "m2_base|m2_oo_cycle|gates|differ" "$OUT/ab.txt" | head -30
  for label in base tree; do
    dir=/tmp/replayssm_ab_base; [[ $label == tree ]] && dir=$PWD
    (cd "$dir" && timeout 90 python3 -m replayssm_ext.benchmark --sections spec --geometries nemotron3-nano-4b \
      --batches 1,256 -B 16 --spec-tokens 4 --accept all --budget-s 35 > "$OUT/spec_$label.log" 2>&1)
    echo "spec $label rc=$? [$((SECONDS - t0)) s]"; grep -E "^m2_spec_base " "$OUT/spec_$label.log" | head -6
  done
else
  OUT=$OUT STAGES=build BUILD_TIMEOUT=240 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
  echo "build [$((SECONDS - t0)) s]"
  cases="state_update or aligned_and_misaligned"
  timeout 150 python3 -m pytest -q tests/test_mamba2_cuda.py -k "$cases" > "$OUT/test.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -2 "$OUT/test.log"
  OUT=$OUT STAGES=sanitize SANITIZE_TOOLS=memcheck SANITIZE_TIMEOUT=150 \
    SANITIZE_ARGS="tests/test_mamba2_cuda.py -x -k '$cases'" bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  echo "memcheck rc=$? [$((SECONDS - t0)) s]"; grep -E "memcheck" "$OUT/sanitize_run.log" | tail -2
fi
