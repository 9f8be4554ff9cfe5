#!/usr/bin/env bash
# docs/prepared/gdn-head-shifts.patch (session 69): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-head-shifts.sh
# It applies the patch (the GDN window kernel's run-time integer divisions outside the chunk loop
# become shifts or go: tile_rows and rows_per_stage are powers of two, the (i, j) pair loops run
# on a kT-wide grid instead of an n-wide one, and the k-head with its first-v-head flag is formed
# once, while the slot is on its way; sm_90a, the T = 4 pair at K = 128: 22 -> 2 divisions, 7200
# -> 6552 static instructions, 123 -> 111 registers) and runs gdn_spec_prepared_ab
# (scripts/device_env.sh): Qwen3.5-4B / 122B, B = 16, all accepted, with the flush / non-flush
# split: T = 4 at batch 256 on 96 SMs (an H200's bandwidth per SM; on an H200 the whole device)
# first, then T = 2 / 4 / 8 at batch 1 / 256 on all SMs (every window size's instances change);
# the GDN spec and snapshot tests (the per-draft snapshot baseline runs the same kernel); racecheck
# on the T = 4 long run where time is left (the pair loops' threads write other (i, j) entries).
# Indices only: the gates' errors must be identical in every pair. ~9 minutes; QUICK=1 (the 96-SM
# pair and the tests) ~5.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
AB_TOKENS=${AB_TOKENS:-2,4,8} AB_TESTS_K=${AB_TESTS_K:-"spec or snapshot"} \
  gdn_spec_prepared_ab docs/prepared/gdn-head-shifts.patch   # scripts/device_env.sh
