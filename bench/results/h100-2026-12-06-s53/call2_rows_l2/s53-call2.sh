#!/usr/bin/env bash
# Session 53, GPU call 2: base (ab_base = main's csrc) against the tree (the output-only warp-rows
# decode, third form, its state rows now L2-cached and flushing rows leaving before the B_j . C
# shuffles; the classic step's rows kernel) at batch 1 / 2 / 8, B = 8 / 16; then the batch-1
# latency probes (bench/latency_floor.py) on the tree's build; the tests of both kernels; memcheck
# and racecheck of both kernels' forms tests.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
BENCH_TIMEOUT=150 scripts/ab_bench.sh --sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60 \
  > "$OUT/ab.txt" 2>&1
grep -E '^(tree|base):' "$OUT/ab.txt"; sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -v "d2d\|commit" | head -60
echo "ab [$((SECONDS - t0)) s]"
for pdl in 1 0; do
  timeout 150 python3 bench/latency_floor.py --pdl $pdl --json "$OUT/floor_pdl$pdl.json" > "$OUT/floor_pdl$pdl.txt" 2>&1
  grep -v Warning "$OUT/floor_pdl$pdl.txt" | tail -n 8
done
echo "probes [$((SECONDS - t0)) s]"
timeout 100 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows or override or update_rows or state_update" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 3 "$OUT/tests.log"
STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=120 \
  SANITIZE_ARGS="tests/test_mamba2_cuda.py -k '(warp_rows_forms and nano and not replay) or (update_rows_forms and nano and not general) or warp_rows_launcher'" \
  bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT"/sanitize*.log | tail -n 8
echo "sanitize [$((SECONDS - t0)) s]"
