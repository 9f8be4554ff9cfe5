#!/usr/bin/env bash
# docs/prepared/m2-so-decay-on-carry.patch (session 65): one GPU call from the repository root of
# main with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/m2-so-decay-on-carry.sh
# It applies the patch (the state-and-output tile loop decays each unit as it is carried from nxt
# into cur, cur = c0 nxt, instead of a copy at the end of the tile and c0 cur at the top of the
# next: session 65's profile at 80 SMs found 16 MOV and 16 FMUL per tile and lane there), then,
# against main (ab_bench, m2_so_ab_sweep): all SMs at batch 1 / 256, B = 16 / 32; 96 SMs at batch
# 256, B = 16 / 32; 80 SMs at batch 256, B = 16. On an H200 the whole device twice instead, both
# routes. The same products in the same order, so the gates' errors must be identical in every pair.
# Then the Mamba-2 GPU tests, and racecheck on the tensor-core update's tests where time is left.
# ~8-9 minutes. QUICK=1: batch 256 only, no racecheck, ~6.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/m2-so-decay-on-carry.patch 2>/dev/null && git apply docs/prepared/m2-so-decay-on-carry.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
m2_so_ab_sweep  # scripts/device_env.sh
# The tests run on the tree's in-place build, which ab_bench made: the whole Mamba-2 GPU file (every
# state-and-output form: flush rows' stored tiles, B = 32's two k-steps, split P at small batch).
timeout $((500 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider \
  > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
if [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py \
    -k "test_decode_update_tensor_cores_steep_decay or (test_decode_update_forms and tensor_cores_nine and (nano or super))" \
    > "$ROOT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$ROOT/racecheck.log"
fi
# Only the folders this device made (an H100 makes no all2, an H200 no sms96 / sms80): at most 8
# files come back from a call, so the per-run tables travel as one archive.
cd "$ROOT" && dirs=$(for d in all all2 sms96 sms80; do [[ -d $d ]] && echo "$d"; done) && tar -czf runs.tgz --exclude='*.png' $dirs && rm -rf $dirs
