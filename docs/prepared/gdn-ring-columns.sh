#!/usr/bin/env bash
# docs/prepared/gdn-ring-columns.patch (session 71): one GPU call from the repository root of main
# with ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base")
# and the patch NOT applied:
#   bash docs/prepared/gdn-ring-columns.sh
# The GDN rings' copies (window kernel and rows kernel) through copy_ring_rows: one 16-byte column
# per thread, set up once (sm_90a: the window kernel's T = 4 pair instance 6552 -> 6080 static
# instructions, its ring group's commit at instruction 1099 -> 633; the rows kernel's decode 4096 ->
# 3960, 651 -> 522). Against ab_base, Qwen3.5-4B / 122B, B = 16: the spec verify (all accepted,
# flush / non-flush split) at T = 4, batch 256 on 96 SMs (an H200's bandwidth per SM; on an H200 the
# whole device) and T = 2 / 4 / 8 at batch 1 / 256 on all SMs; the gdn section (classic step, decode
# cycle and its steps) at batch 1 / 256 on all SMs and 256 on 96; every GDN test on the tree's
# in-place build; racecheck on the T = 4 spec long run while time is left. Indices only: the gates'
# errors must be identical in every pair. ~8-9 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/gdn-ring-columns.patch 2>/dev/null && git apply docs/prepared/gdn-ring-columns.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
sms=(--sms 96); nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && sms=()
geo=(--geometries qwen3.5-4b,qwen3.5-122b -B 16 --budget-s 40)
spec=(--sections spec "${geo[@]}" --accept all --spec-phases)
AB_ROWS='^gdn_spec_(cycle|nonflush|flush) ' AB_KEEP_BASE=0 ab_compare sms96 "${spec[@]}" --spec-tokens 4 --batches 256 "${sms[@]}"
AB_ROWS='^gdn_spec_(cycle|nonflush|flush) ' AB_KEEP_BASE=1 ab_compare spec "${spec[@]}" --spec-tokens 2,4,8 --batches 1,256
AB_ROWS='^gdn_(base|cycle|nonflush|flush) ' AB_KEEP_BASE=1 ab_compare decode --sections gdn "${geo[@]}" --batches 1,256
AB_ROWS='^gdn_(base|cycle|nonflush|flush) ' AB_KEEP_BASE=1 ab_compare decode96 --sections gdn "${geo[@]}" --batches 256 "${sms[@]}"
timeout $((520 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rf -n 14 -p no:cacheprovider \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
if (( SECONDS < 480 )); then
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
    -k "test_spec_long_run and 4-fp32-bf16" > "$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
fi
(cd "$OUT" && tar -czf runs.tgz --exclude='*.png' sms96 spec decode decode96 2>/dev/null && rm -rf sms96 spec decode decode96)
