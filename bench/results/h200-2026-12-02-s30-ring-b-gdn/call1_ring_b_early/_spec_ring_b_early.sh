#!/usr/bin/env bash
# Prepared in session 29 (delete before merging, keep with the results): the Mamba-2 spec verify's
# CUDA-core CTAs at T <= 4 write the window's B to the ring right after the first barrier (from the
# rows just staged) instead of at the end of the kernel, where session 29's call 4 put it for all
# CUDA-core instances: super T = 4 batch 8 lost 1.6-2.3 % there (one wave, the copy on the tail),
# while batch 1 / 256 / 512 gained. T = 8 CUDA-core instances keep the end (right after the barrier
# they spilled up to 180 bytes at N = 256). Local sm_90a compiles against main b24b95f: spills
# 472 -> 456 bytes over mamba2_spec_fp32_t4.cu's 112 instances, 24 -> 16 over t2's 60; the
# benchmarked instances 40-220 instructions shorter; tensor-core instances untouched.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_ring_b_early.sh     # ~8 min: spec A/B, a second tree process, then the spec
#                                        # tests and memcheck + racecheck (one head, pairs, both views)
# Merge if super T = 4 batch 8 is back at or under 24.55 us and no row loses beyond the spread.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
echo "[$((SECONDS - t0)) s] ab"
timeout 40 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 8,64,256 --spec-tokens 2,4 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -14
echo "[$((SECONDS - t0)) s] tree2"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 200 python3 -m pytest -q -rs -n 12 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -k spec > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  # Every CUDA-core instance changed: one head and pairs, aligned and misaligned entry views.
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "spec_full_windows or aligned_and_misaligned" \
    > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
