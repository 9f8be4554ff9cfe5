#!/usr/bin/env bash
# Session 54, GPU call 1: the prepared warp-rows fold (docs/prepared/m2-warp-rows-fold.patch, applied
# in the tree) against main (ab_base = b395d0b's csrc) at batch 1 / 2 / 8, B = 8 / 16, output-only;
# its warp-rows tests; then the late-dots patch applied on top, rebuilt (the base only re-links),
# the same A/B, its tests, and memcheck / racecheck of the forms and rings tests at nano.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AB="--sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60"
summary() { grep -E '^(tree|base):|gates' "$1"; sed -n '/us per step/,$p' "$1" | grep -v "d2d\|commit" | head -40; }
mkdir -p "$OUT/fold" "$OUT/late"
OUT=$OUT/fold BENCH_TIMEOUT=120 scripts/ab_bench.sh $AB > "$OUT/fold/ab.txt" 2>&1
echo "== fold"; summary "$OUT/fold/ab.txt"; echo "fold ab [$((SECONDS - t0)) s]"
timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/fold/tests.log" 2>&1
echo "fold tests rc=$? [$((SECONDS - t0)) s]"; tail -n 3 "$OUT/fold/tests.log"
(git apply docs/prepared/m2-warp-rows-late-dots.patch 2>/dev/null || patch -p1 < docs/prepared/m2-warp-rows-late-dots.patch) || { echo "late-dots patch failed"; exit 1; }
OUT=$OUT/late AB_KEEP_BASE=1 BENCH_TIMEOUT=120 scripts/ab_bench.sh $AB > "$OUT/late/ab.txt" 2>&1
echo "== late"; summary "$OUT/late/ab.txt"; echo "late ab [$((SECONDS - t0)) s]"
timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/late/tests.log" 2>&1
echo "late tests rc=$? [$((SECONDS - t0)) s]"; tail -n 3 "$OUT/late/tests.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=90 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or warp_rows_rings'" \
  bash scripts/gpu_check.sh > "$OUT/late/sanitize_run.log" 2>&1
grep -hE "^== (memcheck|racecheck):|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/late/sanitize*.log "$OUT"/sanitize*.log 2>/dev/null | tail -n 8
echo "sanitize [$((SECONDS - t0)) s]"
