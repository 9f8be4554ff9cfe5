#!/usr/bin/env bash
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
# the tensor-core update's tests. ~9 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git apply --check docs/prepared/m2-so-nine-ctas.patch 2>/dev/null && git apply docs/prepared/m2-so-nine-ctas.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
ROOT=$OUT
ab() {  # folder, benchmark args...
  local dir=$1; shift
  OUT=$ROOT/$dir AB_KEEP_BASE=${keep:-0} scripts/ab_bench.sh --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
    --routes state_and_output "$@" > "$ROOT/$dir.txt" 2>&1
  echo "$dir rc=$? [$((SECONDS - t0)) s]"; grep -E 'FAILED|^gates' "$ROOT/$dir.txt" | cut -c1-160
  grep -E '^m2_(so|oo)_(cycle|nonflush|flush) ' "$ROOT/$dir.txt"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  keep=0 ab all -B 16,32 --batches 1,64,256,512 --budget-s 90 --routes output_only,state_and_output
  keep=1 ab again -B 16 --batches 256 --budget-s 60 --routes output_only,state_and_output
else
  keep=0 ab all -B 16,32 --batches 1,64,256,512 --budget-s 90
  keep=1 ab sms80 -B 16,32 --batches 256 --budget-s 60 --sms 80
  keep=1 ab sms96 -B 16,32 --batches 256 --budget-s 60 --sms 96
fi
timeout 200 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
for tool in memcheck racecheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(( (585 - SECONDS) / 2 )) compute-sanitizer --tool $tool --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py \
    -k "test_decode_update_tensor_cores_steep_decay or (test_decode_update_forms and tensor_cores and nano)" \
    > "$ROOT/$tool.log" 2>&1
  echo "$tool rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$ROOT/$tool.log"
done
cd "$ROOT" && tar -czf runs.tgz --exclude='*.png' all again sms80 sms96 2>/dev/null && rm -rf all again sms80 sms96
