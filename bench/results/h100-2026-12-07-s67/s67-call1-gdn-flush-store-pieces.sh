#!/usr/bin/env bash
# docs/prepared/gdn-flush-store-pieces.patch (session 67): one GPU call from the repository root of
# main with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and
# "ab_base") and the patch NOT applied:
#   bash docs/prepared/gdn-flush-store-pieces.sh
# It applies the patch (a folding CTA of the window kernel's tensor-core instances stores its folded
# chunk piece for piece as issue_chunk brought it in, one shared load and one store at a constant
# offset per piece, where the row-group loop formed each 16-byte store's 64-bit address apart:
# sm_90a, the T = 4 pairs at K = 128, the flush chunk loop 533 -> 455 static instructions, 127 -> 125
# registers), then, against main (ab_bench): Qwen3.5-4B / 122B, B = 16, all accepted, with the
# flush / non-flush split (--spec-phases): T = 4 at batch 1 / 256 and T = 2 / 8 at batch 256 on the
# whole device, then T = 4 at batch 256 on 96 SMs (an H200's bandwidth per SM). The same values
# reach the same addresses, so the gates' errors must be identical in every pair and the non-flush
# step level; the flush step is where a gain shows. Then the GDN spec tests and racecheck on the
# long-run spec cases. ~8 minutes. QUICK=1: T = 4 at batch 256 only, no racecheck, ~5.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-flush-store-pieces.patch 2>/dev/null && git apply docs/prepared/gdn-flush-store-pieces.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 AB_ROWS='^gdn_spec_(cycle|nonflush|flush) '
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
ROOT=$OUT
ab() {  # keep the base build, folder, benchmark args...: the spec section, Qwen3.5-4B / 122B, B = 16, all accepted
  AB_KEEP_BASE=$1 ab_compare "$2" --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
    --spec-phases --budget-s 60 "${@:3}"
}
if [[ ${QUICK:-0} == 1 ]]; then
  ab 0 t4 --spec-tokens 4 --batches 256
else
  ab 0 t4 --spec-tokens 4 --batches 1,256
  ab 1 t28 --spec-tokens 2,8 --batches 256
fi
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || ab 1 sms96 --spec-tokens 4 --batches 256 --sms 96
# The tests run on the tree's in-place build, which ab_bench made.
timeout $((500 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider -k spec \
  > "$ROOT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"
if [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 500 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
    -k "test_spec_long_run and (4-fp32-bf16 or 4-bf16-bf16)" > "$ROOT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$ROOT/racecheck.log"
fi
cd "$ROOT" && tar -czf runs.tgz --exclude='*.png' t4 t28 sms96 2>/dev/null && rm -rf t4 t28 sms96
