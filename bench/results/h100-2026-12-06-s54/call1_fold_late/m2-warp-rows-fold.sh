#!/usr/bin/env bash
# The prepared patch docs/prepared/m2-warp-rows-fold.patch (session 53): flushing rows of the
# output-only warp-rows decode fold in the warp-rows form itself instead of running the replay
# kernel's code after its prefix. One GPU call, from the repository root of main with the patch
# applied (`git apply docs/prepared/m2-warp-rows-fold.patch`) and ab_base prepared from main
# (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base"):
#   MODE=ab,tests,sanitize bash docs/prepared/m2-warp-rows-fold.sh
# ab: base (main) against the tree at batch 1 / 2 / 8, B = 8 / 16, output-only (the flush step and
# the cycle are the rows to read); tests: the warp-rows tests (the forms against the recurrence,
# the kernels' rings bit-identical and checkpoints within a few units); sanitize: memcheck and
# racecheck of the forms test at nano.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
MODE=${MODE:-ab,tests,sanitize}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [[ ,$MODE, == *,ab,* ]]; then
  BENCH_TIMEOUT=150 scripts/ab_bench.sh --sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60 \
    > "$OUT/ab.txt" 2>&1
  sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -v "d2d\|commit"
  echo "ab [$((SECONDS - t0)) s]"
fi
if [[ ,$MODE, == *,tests,* ]]; then
  timeout 120 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 5 "$OUT/tests.log"
fi
if [[ ,$MODE, == *,sanitize,* ]]; then
  STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=120 \
    SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings'" \
    bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  grep -E "^== (memcheck|racecheck):" "$OUT/sanitize_run.log"
  echo "sanitize [$((SECONDS - t0)) s]"
fi
