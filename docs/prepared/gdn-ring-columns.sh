#!/usr/bin/env bash
# docs/prepared/gdn-ring-columns.patch (session 71): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-ring-columns.sh
# The GDN window kernel's ring copies with one 16-byte column per thread set up once (sm_90a, T = 4
# pair instance: ring group's commit at static instruction 1099 -> 607, ~60 fewer instructions per
# thread on its way from the cursors to the first state chunk). gdn_spec_prepared_ab: Qwen3.5-4B /
# 122B, B = 16, all accepted, T = 4 at batch 256 on 96 SMs, T = 2 / 4 / 8 at batch 1 / 256 on all SMs,
# the GDN spec tests, racecheck on the T = 4 long run. Indices only: the gates' errors must be
# identical in every pair. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
AB_TOKENS=2,4,8 gdn_spec_prepared_ab docs/prepared/gdn-ring-columns.patch
