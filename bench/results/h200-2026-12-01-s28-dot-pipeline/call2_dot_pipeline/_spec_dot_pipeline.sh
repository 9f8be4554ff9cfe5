#!/usr/bin/env bash
# Session 25 (prepared in session 24; delete before merging, keep with the results): the Mamba-2
# spec verify's aligned-view CUDA-core stream (kVecStream: fp32 checkpoint, T = 3..4) gets, for
# non-flush CTAs, the dot-only loop with two iterations of state loads in flight per warp that
# session 24 measured on the decode (output-only cycle batch 256 nano 290.7 -> 282.6, super 317.4
# -> 307.3). Compile-only in session 24: the nano / super instance's non-flush loop is ~170
# instructions per iteration against ~283, spills 0 / 0 -> 8 / 20 bytes (outside the loop).
# Session 25 measured it (nano T = 4 -2.1 %, super +1.7 %: not merged); session 27 re-made it on
# aa2a1d8 (compact prologue + grouped fold; add_rank_update_grouped), no spills, the non-flush
# dot-only loop 344 instructions per two iterations, the instance 4488 -> 4824 (super); its A/B
# there (bench/results/h200-2026-12-01-s27-compact-prologue/call5_dot_pipeline/): T = 4 -0.7 to
# -2.8 % on both geometries, the rest within 0.7 %, 142 spec tests passed, but the sanitizers ran
# past their 80 s limit. This run adds a second tree process and gives the sanitizers 240 s.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_dot_pipeline.sh ab           # one call, ~5 min: A/B, 2nd process, spec tests
#   bash scripts/_spec_dot_pipeline.sh san          # same warm machine, <= 5 min: memcheck and
#                                                   # racecheck side by side (8 cases each)
# Merge if the T = 4 rows at batch 64-512 gain and batch 1 / 8 and T = 2 / 8 stay level, and the
# sanitizers are clean.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
case ${1:?ab or san} in
ab)
  BUILD_TIMEOUT=260 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'spec|FAILED|rc=|built' "$OUT/ab.txt" | grep -v snapshot | head -70
  echo "[$((SECONDS - t0)) s] ab"
  timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 8,256,512 --spec-tokens 4 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
  grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -8
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
  timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -k spec > "$OUT/tests.log" 2>&1
  tail -4 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
san)
  [[ -n $(ls replayssm_ext/*.so 2>/dev/null) ]] || { echo "no tree build in place: the machine was not warm"; exit 1; }
  # Side by side (one process each, 16 cores): one after the other they ran past 80 s in session 27.
  for tool in memcheck racecheck; do
    timeout 290 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "spec_vec_stream_forms" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log
  ;;
esac
