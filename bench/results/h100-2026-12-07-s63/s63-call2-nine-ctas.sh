#!/usr/bin/env bash
# Kept as session 63 ran it, as docs/prepared/m2-so-nine-ctas.sh on main 5047c08 (the patch it
# applies is this folder's merged-m2-so-nine-ctas.patch); it runs from there: check out 5047c08.
# docs/prepared/m2-so-nine-ctas.patch (session 58): one GPU call from the repository root of main with
# ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base") and
# the patch NOT applied:
#   bash docs/prepared/m2-so-nine-ctas.sh
# It applies the patch (the state-and-output route's tensor-core instance bounded for 9 CTAs per SM
# instead of 8: 56 registers, no spill on sm_90a; its per-warp dot products laid over the staged x_j
# so that nano's CTA fits 9 by shared memory too), then, against main: all SMs at batch 1 / 64 /
# 256 / 512, and 80 / 96 SMs at batch 256 (the H200's bandwidth per SM, where session 58 found the
# route neither lead- nor issue-bound), nano / super, B = 16 / 32; on an H200 the whole device twice
# instead (both routes: the target's own ratio). Then the Mamba-2 CUDA tests and the sanitizers on
# the tensor-core update's tests (session 58's s58-call2.sh does all of it). ~9 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
git apply --check docs/prepared/m2-so-nine-ctas.patch 2>/dev/null && git apply docs/prepared/m2-so-nine-ctas.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
# The same A/B, tests and sanitizers as session 58's call 2, on this tree.
exec bash bench/results/h100-2026-12-06-s58/s58-call2.sh
