#!/usr/bin/env bash
# docs/prepared/gdn-history-terms-late.patch (session 71): one GPU call from the repository root of
# main with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/gdn-history-terms-late.sh
# The GDN window kernel's tensor-core stage-buffer instances (T <= 4) form the history's share of
# S_base k̂_i / q̂_i per CTA row (non-flush rows) in the stream's first chunk, after that chunk's
# barrier has issued the next chunk's copies, instead of before the stream (sm_90a, T = 4 pairs:
# 111 -> 119 registers, no spill). gdn_spec_prepared_ab: Qwen3.5-4B / 122B, B = 16, all accepted,
# T = 4 at batch 256 on 96 SMs, T = 2 / 4 / 8 at batch 1 / 256 on all SMs (T = 8's instances do not
# change: a check on the build), the GDN spec tests, racecheck on the T = 4 long run. Indices only:
# the gates' errors must be identical in every pair. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
AB_TOKENS=2,4,8 gdn_spec_prepared_ab docs/prepared/gdn-history-terms-late.patch
