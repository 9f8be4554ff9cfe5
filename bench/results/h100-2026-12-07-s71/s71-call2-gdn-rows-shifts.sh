#!/usr/bin/env bash
# docs/prepared/gdn-rows-shifts.patch (session 70): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-rows-shifts.sh
# It applies the patch (the GDN rows kernel, which runs gdn_decode, the classic step and
# gdn_flush: the k-head and the first-v-head flag formed before the slot's check, the chunk count
# and the ring-u copy split by shifts; sm_90a, decode at K = 128 with bf16 activations and an fp32
# checkpoint: 8 -> 2 integer divisions, both while the slot is on its way, 4272 -> 4096 static
# instructions, 124 -> 126 registers) and runs, against ab_base, the gdn section (Qwen3.5-4B /
# 122B, B = 16: the classic step and the decode cycle with its flush / non-flush steps) at batch
# 1 / 256 on all SMs, then at batch 256 on 96 SMs (an H200's bandwidth per SM; on an H200 the
# whole device again); the GDN tests other than the spec verify's on the tree's in-place build;
# memcheck on the decode long run where time is left. Indices only: the gates' errors must be
# identical in every pair. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-rows-shifts.patch 2>/dev/null && git apply docs/prepared/gdn-rows-shifts.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 AB_ROWS='^gdn_(base|cycle|nonflush|flush) '
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
sms=(--sms 96); nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && sms=()
geo=(--sections gdn --geometries qwen3.5-4b,qwen3.5-122b -B 16 --budget-s 40)
AB_KEEP_BASE=0 ab_compare all "${geo[@]}" --batches 1,256
AB_KEEP_BASE=1 ab_compare sms96 "${geo[@]}" --batches 256 "${sms[@]}"
timeout $((480 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rf -n 14 -p no:cacheprovider \
  -k "not spec" > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
if (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 97 \
    python3 -m pytest -q -p no:cacheprovider tests/test_gdn_cuda.py -k "test_decode_long_run" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
fi
(cd "$OUT" && tar -czf runs.tgz --exclude='*.png' all sms96 2>/dev/null && rm -rf all sms96)
