#!/usr/bin/env bash
# Session 16, temporary: ab_vars/vec (main + the prepared aligned-view stream) against the tree
# (+ presorted lane sums), processes alternating; forced / off aligned-view stream; T = 2; bf16 state.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export REPLAYSSM_FAMILIES=mamba2
M2="bench/bench_spec.py --sections spec --accept all -B 16 --geometries nemotron3-nano-4b,nemotron3-super-120b"
B="--batches 1,8,16,32,64,256,512 --spec-tokens 4"
TAG=v1_ REPLAYSSM_M2_SPEC_VEC=1 bash scripts/_ab_alt.sh 2 $M2 $B
TAG=v0_ SKIP_BUILD=1 REPLAYSSM_M2_SPEC_VEC=0 bash scripts/_ab_alt.sh 2 $M2 $B
TAG=t2_ SKIP_BUILD=1 bash scripts/_ab_alt.sh 1 $M2 --batches 64,256 --spec-tokens 2
TAG=bf_ SKIP_BUILD=1 bash scripts/_ab_alt.sh 1 $M2 --batches 256 --spec-tokens 4 --state-dtype bf16
