#!/usr/bin/env bash
# docs/prepared/m2-warp-rows-predicated.patch (session 55): one GPU call from the repository root of
# main, with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/m2-warp-rows-predicated.sh
# It applies the patch; A/B of the tree against main at batch 1 / 2 / 8, B = 8 / 16, output-only
# (the non-flush step, the flush step and the cycle are the rows to read); the warp-rows tests; then
# memcheck / racecheck of the warp-rows tests. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git apply docs/prepared/m2-warp-rows-predicated.patch || { echo "patch failed"; exit 1; }
BENCH_TIMEOUT=120 scripts/ab_bench.sh --sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60 \
  > "$OUT/ab.txt" 2>&1
grep -E '^(tree|base):|gates' "$OUT/ab.txt" | head -4; sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -E "m2_oo"
echo "ab [$SECONDS s]"
timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$SECONDS s]"; tail -n 2 "$OUT/tests.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings or warp_rows_launcher'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -E "^== (memcheck|racecheck):" "$OUT/sanitize_run.log"
echo "sanitize [$SECONDS s]"
