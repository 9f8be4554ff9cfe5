#!/usr/bin/env bash
# docs/prepared/m2-so-flush-b-addr.patch (session 66): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/m2-so-flush-b-addr.sh
# It applies the patch (on flush rows the tile loop forms k-step 0's B addresses per tile, where
# ptxas had hoisted and, since session 66's carry-decay, spilled them in the nine-CTA instance on
# sm_90a: the flush step 2-3.5 % slower at B = 16 in that session's A/B), then, against main
# (ab_bench, m2_so_ab_sweep): all SMs at batch 1 / 256, B = 16 / 32; 96 SMs at batch 256, B = 16 / 32;
# 80 SMs at batch 256, B = 16. On an H200 the whole device twice instead, both routes. Only an
# address is formed differently, so the gates' errors must be identical in every pair, the
# non-flush step level, and the flush step at B = 16 is where a gain would show.
# Then the Mamba-2 GPU tests, and racecheck on the tensor-core update's tests where time is left.
# ~8-9 minutes. QUICK=1: batch 256 only, no racecheck, ~6.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
m2_so_prepared_ab docs/prepared/m2-so-flush-b-addr.patch   # scripts/device_env.sh
