#!/usr/bin/env bash
# Session 53, GPU call 1: the batch-1 latency probes (bench/latency_floor.py, with and without
# programmatic dependent launch), then the A/B of base (ab_base = main's csrc) against the tree
# (wip/s52-warp-rows' third form: the output-only warp-rows decode with the ring requested by
# physical position beside the cursors, and the B_j . C sums split over the warps with all of a
# warp's B loads in flight at once; and the classic step's rows kernel at batch 1-2) at batch 1 /
# 2 / 8, B = 16, output-only and classic rows, then the tree's tests of both kernels.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader
for pdl in 1 0; do
  timeout 150 python3 bench/latency_floor.py --pdl $pdl --json "$OUT/floor_pdl$pdl.json" 2>&1 | tee "$OUT/floor_pdl$pdl.txt" | grep -v Warning
done
echo "probes [$((SECONDS - t0)) s]"
BENCH_TIMEOUT=150 scripts/ab_bench.sh --sections m2 --routes output_only --batches ${BATCHES:-1,2,8} -B 16 --budget-s 40 \
  > "$OUT/ab.txt" 2>&1
grep -E '^(tree|base):' "$OUT/ab.txt"; sed -n '/us per step/,$p' "$OUT/ab.txt" | head -60
echo "ab [$((SECONDS - t0)) s]"
timeout 150 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows or override or update_rows or state_update" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 8 "$OUT/tests.log"
