#!/usr/bin/env bash
# Session 25 (prepared in session 24; delete before merging, keep with the results): the replay
# kernel's entries-first instances built a second time for 16-byte aligned state views (fp32
# checkpoint; a kAlignedView template argument), which the launcher takes on every aligned view
# that does not stream first: the state-and-output route, flush rows there, mamba2_flush, and
# the small batches that split P. Compile-only in session 24: the nano / super instance's stream
# loop carries ~175 instructions per iteration besides the update against ~255 (the run-time
# alignment test and the element-wise fallback beside every state load and store); spills
# 8 / 16 bytes (one 64-bit reload per iteration), against none.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_aligned_entries_first.sh          # one call, ~7 min
# Merge if the state-and-output cycle and the batch 1 / 8 rows gain and the rest stays level.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
BUILD_TIMEOUT=260 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'm2_|FAILED|rc=|built' "$OUT/ab.txt" | head -80
echo "[$((SECONDS - t0)) s] ab"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "aligned_and_misaligned or (long_run_mixed and state_and_output)" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
