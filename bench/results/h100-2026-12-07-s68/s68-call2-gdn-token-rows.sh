#!/usr/bin/env bash
# docs/prepared/gdn-token-rows.patch (session 68): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-token-rows.sh
# It applies the patch (the GDN window kernel's tensor-core stage-buffer instances form each
# token's output row and ring entry once per thread before the solve's rows, and unroll the solve
# over kT tokens, not 8: sm_90a, the T = 4 pairs at K = 128, 7408 -> 7200 static instructions,
# 127 -> 123 registers, per row and token ~40 -> ~30 instructions after the stream), then, against
# main (ab_bench): Qwen3.5-4B / 122B, B = 16, all accepted, with the flush / non-flush split: T = 4
# at batch 256 on 96 SMs (an H200's bandwidth per SM; on an H200 the whole device) first, then T = 4
# at batch 1 / 256 on all SMs, then T = 2 / 8 at batch 256 where time is left. The same values reach
# the same addresses, so the gates' errors must be identical in every pair. Then the GDN spec tests
# (no racecheck: the patch moves no shared-memory access). ~8 minutes. QUICK=1: the 96-SM pair and
# the tests only, ~5.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-token-rows.patch 2>/dev/null && git apply docs/prepared/gdn-token-rows.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 AB_ROWS='^gdn_spec_(cycle|nonflush|flush) '
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
ab() {  # keep the base build, folder, benchmark args...: the spec section, Qwen3.5-4B / 122B, B = 16, all accepted
  AB_KEEP_BASE=$1 ab_compare "$2" --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
    --spec-phases --budget-s 60 "${@:3}"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ab 0 sms96 --spec-tokens 4 --batches 256
else
  ab 0 sms96 --spec-tokens 4 --batches 256 --sms 96
fi
if [[ ${QUICK:-0} != 1 ]]; then
  ab 1 t4 --spec-tokens 4 --batches 1,256
  (( SECONDS < 330 )) && ab 1 t28 --spec-tokens 2,8 --batches 256
fi
# The tests run on the tree's in-place build, which ab_bench made.
timeout $((585 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider -k spec \
  > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
cd "$ROOT" && tar -czf runs.tgz --exclude='*.png' t4 t28 sms96 2>/dev/null && rm -rf t4 t28 sms96
