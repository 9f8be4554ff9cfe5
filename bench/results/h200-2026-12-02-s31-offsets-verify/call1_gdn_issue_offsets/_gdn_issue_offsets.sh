#!/usr/bin/env bash
# Prepared in session 30 (delete before merging, keep with the results): the GDN window kernel's
# stage-chunk cp.async with per-thread piece offsets set up once per CTA (issue_chunk), instead of
# 64-bit address arithmetic per piece and chunk. Session 30 measured this exact code against main
# cdabfca in one run (bench/results/h200-2026-12-02-s30-ring-b-gdn/call4_gdn_issue_offsets/):
# Qwen3.5-4B batch 256 T = 4 262.07 -> 253.64 us, batch 512 505.26 -> 483.73; Qwen3.5-122B batch
# 256 T = 4 502.27 -> 479.60; T = 2 -1.8 to -3.1 %; batch 8 / 64 level; the benchmark's gates
# passed; the GDN spec tests reached ~126 passed, 0 failed before the call's time ran out.
# This call: a second A/B, then every GDN GPU test and memcheck / racecheck of the stage-path forms.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_gdn_issue_offsets.sh              # ~8 min with a cold start
# Merge if every test passes, both sanitizers are clean and the A/B gains again.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
BUILD_TIMEOUT=240 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 \
  --accept all --batches 1,8,64,256,512 --spec-tokens 2,4,8 > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
echo "[$((SECONDS - t0)) s] ab"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 330 python3 -m pytest -q -rs -n 12 tests/test_gdn_cuda.py tests/test_gdn_ops.py > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  # Pairs at T = 4 (swizzled, two buffers, L2 lead), one head at T = 2 and 1 (plain layout), the
  # bf16 checkpoint's T = 8 two-buffer instance, K = 64 / 256 pieces, and the snapshot baseline.
  timeout 330 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_gdn_cuda.py -k "(spec_long_run and (4-fp32-bf16 or 2-fp16-fp16 or 1-bf16-bf16)) or (spec_geometries and launcher) or snapshot" \
    > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
