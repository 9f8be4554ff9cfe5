#!/usr/bin/env bash
# Session 55, GPU call 4: main 5872a70 (base, ab_base) against the same kernel without the token-b
# part (variant-no-token-b.patch applied to the tree: the token's B written to the ring from four
# global loads again), since token-b alone had measured 1-4 % slower in call 1.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
BENCH_TIMEOUT=120 scripts/ab_bench.sh --sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60 > "$OUT/ab.txt" 2>&1
grep -E '^(tree|base):|gates' "$OUT/ab.txt" | head -4; sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -E "m2_oo"
