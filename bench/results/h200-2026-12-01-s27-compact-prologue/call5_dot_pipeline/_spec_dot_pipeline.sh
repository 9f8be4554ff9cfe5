#!/usr/bin/env bash
# Session 25 (prepared in session 24; delete before merging, keep with the results): the Mamba-2
# spec verify's aligned-view CUDA-core stream (kVecStream: fp32 checkpoint, T = 3..4) gets, for
# non-flush CTAs, the dot-only loop with two iterations of state loads in flight per warp that
# session 24 measured on the decode (output-only cycle batch 256 nano 290.7 -> 282.6, super 317.4
# -> 307.3). Compile-only in session 24: the nano / super instance's non-flush loop is ~170
# instructions per iteration against ~283, spills 0 / 0 -> 8 / 20 bytes (outside the loop).
# Session 25 measured it (nano T = 4 -2.1 %, super +1.7 %: not merged); session 27 re-made it on
# aa2a1d8 (compact prologue + grouped fold; add_rank_update_grouped), no spills, the non-flush
# dot-only loop 344 instructions per two iterations, the instance 4488 -> 4824 (super).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_dot_pipeline.sh              # one call, ~7 min
# Merge if the T = 4 rows at batch 64-512 gain and batch 1 / 8 and T = 2 / 8 stay level.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
BUILD_TIMEOUT=260 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'spec|FAILED|rc=|built' "$OUT/ab.txt" | grep -v snapshot | head -70
echo "[$((SECONDS - t0)) s] ab"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py -k spec > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "spec_vec_stream_forms" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
