#!/usr/bin/env bash
# Session 58, call 1: the prepared script that fits the card this call got. On an H200:
# docs/prepared/gdn-l2-lead-by-bandwidth.sh (the GDN verify's T = 4 lead 2 against 1, never measured
# on an H200). Otherwise (what ran, on an H100): s58-m2-so-l2-lead.sh, session 57's
# docs/prepared/m2-so-l2-lead.sh moved here with its patch once measured (the state-and-output
# route's L2 lead at 132 / 96 / 80 SMs; needs ab_base from main carried).
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash docs/prepared/gdn-l2-lead-by-bandwidth.sh
else
  bash bench/results/h100-2026-12-06-s58/s58-m2-so-l2-lead.sh
fi
