#!/usr/bin/env bash
# docs/prepared/m2-small-divisor.patch (session 70): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/m2-small-divisor.sh
# It applies the patch (the Mamba-2 replay and spec kernels' run-time integer divisions in the
# entries' x staging by common/small_divisor.cuh, the spec kernel's task split by comparisons;
# sm_90a, the nine-CTA state-and-output instance 7 -> 1 divisions, the x staging's trip 54 -> 37
# instructions; the spec pairs 8 -> 3) and runs, against ab_base, nano / super, B = 16, bf16
# activations, fp32 checkpoint:
# both decode routes at batch 1 / 256 on all SMs, then at batch 256 on 96 SMs (an H200's bandwidth
# per SM; on an H200 the whole device again); the spec verify, all accepted, T = 4 / 8 at batch 256
# on all SMs and T = 4 on 96; the Mamba-2 GPU test file on the tree's in-place build (the
# misaligned paged caches of the long runs take the element path); memcheck on the long runs where
# time is left.
# Indices only: the gates' errors must be identical in every pair. ~9 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/m2-small-divisor.patch 2>/dev/null && git apply docs/prepared/m2-small-divisor.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
sms=(--sms 96); nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && sms=()
geo=(--geometries nemotron3-nano-4b,nemotron3-super-120b -B 16)
AB_KEEP_BASE=0 ab_compare all --sections m2 "${geo[@]}" --routes output_only,state_and_output --batches 1,256 --budget-s 40
AB_KEEP_BASE=1 ab_compare sms96 --sections m2 "${geo[@]}" --routes output_only,state_and_output --batches 256 \
  --budget-s 40 "${sms[@]}"
AB_ROWS='^m2_spec_cycle ' AB_KEEP_BASE=1 ab_compare spec --sections spec "${geo[@]}" --accept all --spec-tokens 4,8 \
  --batches 256 --budget-s 40
AB_ROWS='^m2_spec_cycle ' AB_KEEP_BASE=1 ab_compare spec96 --sections spec "${geo[@]}" --accept all --spec-tokens 4 \
  --batches 256 --budget-s 40 "${sms[@]}"
timeout $((500 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
if (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 97 \
    python3 -m pytest -q -p no:cacheprovider tests/test_mamba2_cuda.py -k "test_long_run_mixed_phases or (test_spec_long_run and 16)" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
fi
(cd "$OUT" && tar -czf runs.tgz --exclude='*.png' all sms96 spec spec96 2>/dev/null && rm -rf all sms96 spec spec96)
