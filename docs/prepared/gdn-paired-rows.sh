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
# 8-byte). ~8 minutes. QUICK=1: the 96-SM pair and the tests only, ~5.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-paired-rows.patch 2>/dev/null && git apply docs/prepared/gdn-paired-rows.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 AB_ROWS='^gdn_spec_(cycle|nonflush|flush) '
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
ab() {  # keep the base build, folder, benchmark args...: the spec section, Qwen3.5-4B / 122B, B = 16, all accepted
  AB_KEEP_BASE=$1 ab_compare "$2" --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
    --spec-phases --budget-s 40 "${@:3}"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ab 0 sms96 --spec-tokens 4 --batches 256
else
  ab 0 sms96 --spec-tokens 4 --batches 256 --sms 96
fi
[[ ${QUICK:-0} != 1 ]] && ab 1 t4 --spec-tokens 4 --batches 1,256
# The tests run on the tree's in-place build, which ab_bench made.
timeout $((500 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider -k spec \
  > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
if [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
    -k "test_spec_long_run and 4-fp32-bf16" > "$ROOT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$ROOT/racecheck.log"
fi
cd "$ROOT" && dirs=$(ls -d sms96 t4 2>/dev/null) && tar -czf runs.tgz --exclude='*.png' $dirs && rm -rf $dirs
