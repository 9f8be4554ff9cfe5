#!/usr/bin/env bash
# Session 30 (delete before merging, keep with the results): the GDN window kernel's CTAs that do
# not fold take a third stage buffer in the shared rows of the history's k_j and u_j (free once the
# first chunk's barrier passes) wherever the instance streams through two (v-head pairs at T = 4,
# the bf16 checkpoint's T = 8 instance): two chunks in flight instead of one at the same CTAs per SM.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_gdn_ring_buffer.sh                # ~8 min: GDN A/B (fp32 and bf16 checkpoints),
#                                                   # L2 leads, GDN spec tests, memcheck + racecheck
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --accept all)
BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh "${ARGS[@]}" --batches 1,8,64,256,512 --spec-tokens 2,4,8 \
  > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
echo "[$((SECONDS - t0)) s] ab fp32"
mkdir -p "$OUT/bf16"
OUT=$OUT/bf16 AB_KEEP_BASE=1 BUILD_TIMEOUT=300 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${ARGS[@]}" --state-dtype bf16 \
  --batches 8,64,256 --spec-tokens 4,8 > "$OUT/ab_bf16.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=' "$OUT/ab_bf16.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -20
echo "[$((SECONDS - t0)) s] ab bf16"
for lead in 0 1 2; do
  REPLAYSSM_GDN_L2=$lead timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 64,256,512 --spec-tokens 4 \
    --out "$OUT/ab_lead$lead" > "$OUT/ab_lead$lead.log" 2>&1
  echo "lead $lead: $(grep -E '\] gdn_spec_cycle ' "$OUT/ab_lead$lead.log" | awk '{print $3,$4,$7}' | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] leads"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* bf16) && rm -rf "$OUT"/ab_* "$OUT/bf16"
timeout 240 python3 -m pytest -q -rs -n 12 tests/test_gdn_cuda.py tests/test_gdn_ops.py -k spec > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  # Pairs at T = 4 with mixed phases (three-buffer and two-buffer CTAs in one launch), small rings
  # (the history rows grown to one chunk), and the bf16 checkpoint's two-buffer T = 8 instance.
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_gdn_cuda.py -k "(spec_long_run and 4-fp32-bf16 and pairs) or (spec_sweep and 8-4 and pairs) or (spec_geometries and bf16-bf16 and launcher and 6-8)" \
    > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
