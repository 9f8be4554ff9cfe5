#!/usr/bin/env bash
# Session 54, GPU call 2: the warp-rows decode as its own kernel under the 64-register bound, its B
# entries copied to shared memory by cp.async (all in flight together), the token's x in lane R,
# flushing rows folding there (state rows read again from L2), against main (ab_base = b395d0b's
# csrc) at batch 1 / 2 / 8, B = 8 / 16, output-only; the warp-rows tests; memcheck / racecheck.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
BENCH_TIMEOUT=120 scripts/ab_bench.sh --sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60 > "$OUT/ab.txt" 2>&1
grep -E '^(tree|base):|gates' "$OUT/ab.txt"; sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -v "d2d\|commit" | head -48
echo "ab [$((SECONDS - t0)) s]"
timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 5 "$OUT/tests.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -hE "^== (memcheck|racecheck):" "$OUT"/sanitize_run.log
echo "sanitize [$((SECONDS - t0)) s]"
