#!/usr/bin/env bash
# Prepared in session 17 (delete before merging): the GDN window kernel's register stream at T = 3..8
# (gdn/window_stream.cuh, on common/mma_state_stream.cuh, which the Mamba-2 spec kernel's
# tensor-core stream now shares). Two GPU calls, each carrying .whl (and ab_base for bench):
#   bash scripts/_gdn_regs.sh tests   full build, the whole GPU suite, memcheck on the register
#                                     stream's forms (~9 min)
#   bash scripts/_gdn_regs.sh bench   here first: scripts/ab_bench.sh --prepare <main before the patch>;
#                                     same run, main vs the patch, both families (spec: GDN T = 4 / 8,
#                                     Mamba-2 T = 8), then the patch's build with REPLAYSSM_GDN_SPEC_REGS
#                                     0 / 1 alternating (the T = 4 register stream at 5 CTAs per SM was
#                                     never timed; T = 8 measured 9-11 % faster in session 17), then
#                                     racecheck (GDN) and memcheck (Mamba-2 tensor-core stream) (~9 min)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
# compute-sanitizer on the register stream's forms (GDN) or the Mamba-2 tensor-core stream's.
sanitize() {  # family tool
  local sel
  if [[ $1 == gdn ]]; then
    sel=(tests/test_gdn_cuda.py -k "test_spec_regs_override_errors or (test_spec_stream_forms and registers and launcher and (32-6-4 or 16-3-8))")
  else
    sel=(tests/test_mamba2_cuda.py -k "test_spec_stream_forms and mma and launcher and (8-8-6 or 16-7-4)")
  fi
  timeout 45 compute-sanitizer --tool "$2" --error-exitcode 3 python3 -m pytest -q -x "${sel[@]}" > "$OUT/san_$1_$2.log" 2>&1
  echo "$1 $2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$1_$2.log" | tr '\n' ' ')"
}
case ${1:-} in
  tests)
    timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
    timeout 330 python3 -m pytest -q -n 16 tests > "$OUT/tests.log" 2>&1; tail -3 "$OUT/tests.log"
    echo "[$((SECONDS - t0)) s] suite"
    sanitize gdn memcheck
    ;;
  bench)
    bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b,nemotron3-nano-4b,nemotron3-super-120b \
      --batches 1,64,256 -B 16 --spec-tokens 4,8 --accept all 2>&1 | grep -E "built|rc=|FAILED|_spec_cycle|d2d_copy_kernel|tree/base"
    echo "[$((SECONDS - t0)) s] A/B"
    # The tree's build is in place: stage buffers vs registers in one build, processes alternating.
    for round in 1 2; do
      for regs in 0 1; do
        REPLAYSSM_GDN_SPEC_REGS=$regs timeout 60 python3 -m replayssm_ext.benchmark --sections spec \
          --geometries qwen3.5-4b,qwen3.5-122b --batches 64,256,512 -B 16 --spec-tokens 4,8 --accept all \
          --out "$OUT/tree_r${regs}_$round" > "$OUT/tree_r${regs}_$round.log" 2>&1
        echo "regs=$regs round $round: $(grep -E '\] gdn_spec_cycle' "$OUT/tree_r${regs}_$round.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
      done
    done
    echo "[$((SECONDS - t0)) s] toggles"
    sanitize gdn racecheck
    sanitize m2 memcheck
    ;;
  *) echo "usage: scripts/_gdn_regs.sh tests|bench" >&2; exit 2 ;;
esac
echo "[$((SECONDS - t0)) s] done"
