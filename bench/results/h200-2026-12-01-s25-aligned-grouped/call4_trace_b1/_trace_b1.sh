#!/usr/bin/env bash
# Session 25 (delete before merging, keep with the results): batch 1's time per launch split into
# kernel body and launch gap with bench/profile_step.py --trace (torch.profiler / CUPTI on a CUDA
# graph of 32 launches; Nsight Systems is not installed on the GPU machine), for the decode's
# output-only non-flush and flush steps, the state-and-output step, the classic step, and at
# batch 256 for contrast. Mamba-2 kernels only.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
if [[ -z $(ls replayssm_ext/*.so 2>/dev/null) ]]; then
  timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] built"
fi
g=nemotron3-nano-4b
tr() { timeout 60 python3 bench/profile_step.py --trace 32 --iters 20 --geometry $g "$@" 2>&1 | grep -v Warning; }
{
  tr --op mamba2_decode --batch 1 --hist 8
  tr --op mamba2_decode --batch 1 --hist 15
  tr --op mamba2_decode --batch 1 --hist 0
  tr --op mamba2_decode --batch 1 --hist 15 --flush
  tr --op mamba2_decode --batch 1 --hist 8 --route state_and_output
  tr --op mamba2_state_update --batch 1
  tr --op mamba2_decode --batch 8 --hist 8
  tr --op mamba2_decode --batch 256 --hist 8
  tr --op mamba2_state_update --batch 256
} | tee "$OUT/trace_b1.txt"
echo "[$((SECONDS - t0)) s] traced"
