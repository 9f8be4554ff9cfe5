#!/usr/bin/env bash
# Kept as run in session 55 call 1, from docs/prepared/ (the paths are those of then: the repository
# root two levels up, the three patches beside it; the patches token-b and copies-first are merged
# as 5872a70, state-copies is dropped-state-copies.patch here).
# The prepared patches docs/prepared/m2-warp-rows-{token-b,copies-first,state-copies}.patch
# (session 54, each on top of the one before): one GPU call from the repository root of main with
# ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base"),
# none of them applied:
#   bash docs/prepared/m2-warp-rows-copies.sh
# It applies them one at a time; after each, an A/B of the tree so far against main at batch 1 / 2 /
# 8, B = 8 / 16 (output-only: the non-flush step, the flush step and the cycle are the rows to
# read; each patch's own effect is the difference from the tree before it) and the warp-rows tests;
# then memcheck / racecheck of the last tree.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AB="--sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60"
summary() { grep -E '^(tree|base):|gates' "$1" | head -4; sed -n '/us per step/,$p' "$1" | grep -E "m2_oo" | grep -E "    (1|2) "; }
keep=0
for v in token-b copies-first state-copies; do
  (git apply docs/prepared/m2-warp-rows-$v.patch 2>/dev/null || patch -p1 < docs/prepared/m2-warp-rows-$v.patch > /dev/null) ||
    { echo "$v: patch failed"; exit 1; }
  mkdir -p "$OUT/$v"
  OUT=$OUT/$v AB_KEEP_BASE=$keep BENCH_TIMEOUT=120 scripts/ab_bench.sh $AB > "$OUT/$v/ab.txt" 2>&1
  echo "== $v"; summary "$OUT/$v/ab.txt"; echo "$v ab [$((SECONDS - t0)) s]"
  timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/$v/tests.log" 2>&1
  echo "$v tests rc=$? [$((SECONDS - t0)) s]"; tail -n 2 "$OUT/$v/tests.log"
  keep=1
done
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -E "^== (memcheck|racecheck):" "$OUT/sanitize_run.log"
echo "sanitize [$((SECONDS - t0)) s]"
