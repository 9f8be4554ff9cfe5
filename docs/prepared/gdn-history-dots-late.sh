#!/usr/bin/env bash
# docs/prepared/gdn-history-dots-late.patch (session 71, on top of gdn-history-terms-late.patch):
# one GPU call from the repository root of main, carry ".whl" (ab_base is made here), neither patch
# applied; only worth its call if gdn-history-terms-late measured a gain:
#   bash docs/prepared/gdn-history-dots-late.sh
# The non-flush rows' history dot products (k_j . k̂_i, k_j . q̂_i) join the history terms in the
# stream's first chunk, behind a barrier of their own, and the window's B fragments load after them
# (sm_90a, T = 4 pairs: 119 -> 120 registers, no spill; the second chunk's copy at static instruction
# 3578, against 3864 with the terms alone and 4427 on main). It applies gdn-history-terms-late.patch,
# copies that csrc/ to ab_base/csrc (so the A/B is this patch alone), applies this patch and runs
# gdn_spec_prepared_ab: Qwen3.5-4B / 122B, B = 16, all accepted, T = 4 at batch 256 on 96 SMs, T = 2 /
# 4 / 8 at batch 1 / 256 on all SMs, the GDN spec tests, racecheck on the T = 4 long run (the new
# barrier). Indices only: the gates' errors must be identical in every pair. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-history-terms-late.patch 2>/dev/null && git apply docs/prepared/gdn-history-terms-late.patch
git diff --quiet -- csrc && { echo "gdn-history-terms-late.patch not applied"; exit 1; }
rm -rf ab_base && mkdir -p ab_base && cp -r csrc ab_base/csrc && echo "main + gdn-history-terms-late" > ab_base/REV
git apply docs/prepared/gdn-history-dots-late.patch || { echo "gdn-history-dots-late.patch not applied"; exit 1; }
AB_TOKENS=2,4,8 gdn_spec_prepared_ab docs/prepared/gdn-history-dots-late.patch  # applied above: its own apply skips
