#!/usr/bin/env bash
# Session 58, call 2: the working tree's state-and-output route (in call 2: the tensor-core update
# with the decay deferred from the tile to the output on rows that do not flush, no 16 FMUL per
# tile) against ab_base (main 611625c's csrc, carried), on all SMs (batch 1 / 64 / 256 / 512) and on 96 / 80
# SMs (batch 256, twice at 80), nano / super, B = 16 / 32; then the Mamba-2 CUDA tests. On an H200:
# both routes on all SMs, the second pair at batch 256 in place of the partitions.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
ab() {  # folder, benchmark args...
  local dir=$1; shift
  OUT=$ROOT/$dir AB_KEEP_BASE=${keep:-0} scripts/ab_bench.sh --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
    --routes state_and_output "$@" > "$ROOT/$dir.txt" 2>&1
  echo "$dir rc=$? [$((SECONDS - t0)) s]"; grep -E 'FAILED|^gates' "$ROOT/$dir.txt" | cut -c1-160
  grep -E '^m2_(so|oo)_(cycle|nonflush|flush) ' "$ROOT/$dir.txt"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  # An H200: the target's own ratio (state-and-output over output-only, batch 256, B = 16) on both
  # sides, and a second pair at batch 256.
  keep=0 ab all -B 16,32 --batches 1,64,256,512 --budget-s 90 --routes output_only,state_and_output
  keep=1 ab sms80 -B 16 --batches 256 --budget-s 60 --routes output_only,state_and_output
else
  keep=0 ab all -B 16,32 --batches 1,64,256,512 --budget-s 90
  keep=1 ab sms80 -B 16,32 --batches 256 --budget-s 60 --sms 80
  keep=1 ab sms96 -B 16,32 --batches 256 --budget-s 60 --sms 96
  keep=1 ab sms80b -B 16 --batches 256 --budget-s 60 --sms 80
fi
timeout 200 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
for tool in memcheck racecheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(( (585 - SECONDS) / 2 )) compute-sanitizer --tool $tool --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py \
    -k "test_decode_update_tensor_cores_steep_decay or (test_decode_update_forms and tensor_cores and (nano or super))" \
    > "$ROOT/$tool.log" 2>&1
  echo "$tool rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$ROOT/$tool.log"
done
cd "$ROOT" && tar -czf runs.tgz --exclude='*.png' all sms80 sms96 sms80b 2>/dev/null && rm -rf all sms80 sms96 sms80b
