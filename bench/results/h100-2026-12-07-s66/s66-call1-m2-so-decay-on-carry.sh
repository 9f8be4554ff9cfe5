#!/usr/bin/env bash
# docs/prepared/m2-so-decay-on-carry.patch (session 65): one GPU call from the repository root of
# main with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/m2-so-decay-on-carry.sh
# It applies the patch (the state-and-output tile loop decays each unit as it is carried from nxt
# into cur, cur = c0 nxt, instead of a copy at the end of the tile and c0 cur at the top of the
# next: session 65's profile at 80 SMs found 16 MOV and 16 FMUL per tile and lane there), then,
# against main (ab_bench, m2_so_ab_sweep): all SMs at batch 1 / 256, B = 16 / 32; 96 SMs at batch
# 256, B = 16 / 32; 80 SMs at batch 256, B = 16. On an H200 the whole device twice instead, both
# routes. The same products in the same order, so the gates' errors must be identical in every pair.
# Then the Mamba-2 GPU tests, and racecheck on the tensor-core update's tests where time is left.
# ~8-9 minutes. QUICK=1: batch 256 only, no racecheck, ~6.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/m2-so-decay-on-carry.patch 2>/dev/null && git apply docs/prepared/m2-so-decay-on-carry.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
m2_so_ab_sweep       # scripts/device_env.sh
m2_so_merge_checks   # the Mamba-2 GPU tests, racecheck, the runs archived
