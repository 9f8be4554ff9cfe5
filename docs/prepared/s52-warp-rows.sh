#!/usr/bin/env bash
# Session 52, GPU call: base = ab_base (main), tree = the working tree (the warp-rows form of the
# output-only decode at small batch, its ring requested beside the cursors), both
# built in one call; the m2 section (output-only) at batch 1, 2, 8 (B = 8, 16), then the tree's
# decode GPU tests.
#   MODE: a comma list of ab, tests, sanitize (default ab,tests)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
MODE=${MODE:-ab,tests}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [[ ,$MODE, == *,ab,* ]]; then
  BENCH_TIMEOUT=200 scripts/ab_bench.sh --sections m2 --routes ${ROUTES:-output_only} --batches ${BATCHES:-1,2,8} -B ${BCAPS:-8,16} --budget-s ${BUDGET:-40} \
    > "$OUT/ab.txt" 2>&1
  grep -E '^(tree|base):' "$OUT/ab.txt"; sed -n '/us per step/,$p' "$OUT/ab.txt" | head -90
  echo "ab [$((SECONDS - t0)) s]"
fi
if [[ ,$MODE, == *,tests,* ]]; then
  timeout 280 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 \
    -k "${TESTS:-warp_rows or stream_order or long_run_mixed or history_capacities or dtype_pairs or override}" \
    > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 15 "$OUT/tests.log"
fi
if [[ ,$MODE, == *,sanitize,* ]]; then
  STAGES=sanitize SANITIZE_TOOLS="memcheck racecheck" SANITIZE_TIMEOUT=200 \
    SANITIZE_ARGS="tests/test_mamba2_cuda.py -k 'warp_rows_forms and nano or warp_rows_rings or warp_rows_launcher'" \
    bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/sanitize.log" | tail -n 6
  echo "sanitize [$((SECONDS - t0)) s]"
fi
