#!/usr/bin/env bash
# Session 55, GPU call 3: main 5872a70 (the warp-rows decode with its copies first): the Mamba-2
# decode table at batch 1 / 64 / 256 / 512, B = 8 / 16 / 32, nano and super (issue 3's table),
# on whatever card the call got (named nvidia-h200 in the hope of an H200 for the target rows).
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
STAGES=build BUILD_TIMEOUT=220 bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
echo "build rc=$? [$SECONDS s]"; grep -E "^== build:" "$OUT/gpu_check.log"
timeout 240 python3 -m replayssm_ext.benchmark --sections m2 --batches 1,64,256,512 -B 8,16,32 --budget-s 200 \
  --out "$OUT/table" > "$OUT/m2.log" 2>&1
echo "table rc=$? [$SECONDS s]"; grep -E "^(m2_|commit|d2d)" "$OUT/m2.log" | awk '!seen[$0]++' | head -150
