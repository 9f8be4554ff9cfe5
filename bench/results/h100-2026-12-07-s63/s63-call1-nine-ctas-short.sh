#!/usr/bin/env bash
# Kept as session 63 ran it, as docs/prepared/m2-so-nine-ctas-short.sh on main 5047c08 (the patch
# it applies is this folder's merged-m2-so-nine-ctas.patch); it runs from there: check out 5047c08.
# docs/prepared/m2-so-nine-ctas.patch's A/B cut to fit a call of ~7 minutes (session 59: the device
# budget left after repeated failed machine starts could not hold m2-so-nine-ctas.sh's ~9). One GPU
# call from the repository root of main with ab_base prepared from main (carry ".whl", "ab_base") and
# the patch NOT applied:
#   bash docs/prepared/m2-so-nine-ctas-short.sh
# Against main, nano / super, B = 16: all SMs at batch 1 / 256 (on an H200 both routes: the target's
# ratio) and, on an H100, 80 SMs at batch 256 (the H200's bandwidth per SM); then, with time left,
# the Mamba-2 tensor-core update tests. No sanitizers: a win is merged only after the full script.
# QUICK=1 (session 60, a budget worn down by failed machine starts): batch 256 only, no tests; ~4 min.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=240 BENCH_TIMEOUT=100
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git apply --check docs/prepared/m2-so-nine-ctas.patch 2>/dev/null && git apply docs/prepared/m2-so-nine-ctas.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
ROOT=$OUT
quick=${QUICK:-0}
all_batches=$( ((quick)) && echo 256 || echo 1,256)
ab() {  # folder, benchmark args...
  local dir=$1; shift
  OUT=$ROOT/$dir AB_KEEP_BASE=${keep:-0} scripts/ab_bench.sh --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
    -B 16 "$@" > "$ROOT/$dir.txt" 2>&1
  echo "$dir rc=$? [$((SECONDS - t0)) s]"; grep -E 'FAILED|^gates' "$ROOT/$dir.txt" | cut -c1-160
  grep -E '^m2_(so|oo)_(cycle|nonflush|flush) ' "$ROOT/$dir.txt"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  keep=0 ab all --batches "$all_batches" --budget-s 40 --routes output_only,state_and_output
else
  keep=0 ab all --batches "$all_batches" --budget-s 40 --routes state_and_output
  keep=1 ab sms80 --batches 256 --budget-s 30 --routes state_and_output --sms 80
fi
(( !quick && SECONDS - t0 < 420 )) && {
  timeout $((540 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider -k "tensor_cores" > "$ROOT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$ROOT/tests.log" | head; tail -n 1 "$ROOT/tests.log"; }
cd "$ROOT" && tar -czf runs.tgz --exclude='*.png' all sms80 2>/dev/null && rm -rf all sms80
