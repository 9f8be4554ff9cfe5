#!/usr/bin/env bash
# docs/prepared/gdn-ring-k-16b.patch (session 69): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-ring-k-16b.sh
# It applies the patch (the GDN window kernel's k̂ append to ring_k after the solve: 16 bytes per
# thread and trip instead of one element, so one trip per thread at n K <= 8 kThreads with 2-byte
# activations instead of n K / kThreads trips of index arithmetic, all after the stream) and runs
# gdn_spec_prepared_ab (scripts/device_env.sh): Qwen3.5-4B / 122B, B = 16, all accepted, T = 4 at
# batch 256 on 96 SMs first, then (unless QUICK=1) batch 1 / 256 on all SMs; the GDN spec tests; a
# racecheck while time is left. The same values reach the ring, so the gates' errors must be
# identical in every pair.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
gdn_spec_prepared_ab docs/prepared/gdn-ring-k-16b.patch   # scripts/device_env.sh
