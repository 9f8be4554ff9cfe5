#!/usr/bin/env bash
# docs/prepared/gdn-paired-rows.patch (session 68): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-paired-rows.sh
# It applies the patch (in the GDN window kernel's solve tail, the T <= 4 tensor-core instances with
# 2-byte activations take two adjacent rows per thread where the output and ring-u bases are 4-byte
# aligned and the strides even: float2 shared loads, one 4-byte store of both rows per token and
# tensor, half the per-row setup), then, against main (ab_bench): Qwen3.5-4B / 122B, B = 16, all
# accepted, with the flush / non-flush split: T = 4 at batch 256 on 96 SMs (an H200's bandwidth per
# SM; on an H200 the whole device) first, then T = 4 at batch 1 / 256 on all SMs. The same
# operations per row, so the gates' errors must be identical in every pair. Then the GDN spec tests
# and, where time is left, racecheck on the long-run spec cases (the tail's shared loads are now
# 8-byte). ~8 minutes. QUICK=1: the 96-SM pair and the tests only, ~5 (session 69 ran that). What
# is left after it: SKIP96=1 (all SMs, T = 4 at batch 1 / 256, tests, racecheck).
# The call itself is gdn_spec_prepared_ab in scripts/device_env.sh.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
gdn_spec_prepared_ab docs/prepared/gdn-paired-rows.patch   # scripts/device_env.sh
