#!/usr/bin/env bash
# Session 28 (delete before merging, keep with the results): the Mamba-2 spec verify's decay
# weights as one pass of (head, entry) tasks, each a single chain of adds (entry k's sums for
# tokens i extend one another), instead of a loop per head and per (k, i) with a sum each. Same
# additions in the same order. Aimed at the CTA's path before its first stream iteration: rolling
# these loops (m2-compact-weights) made T = 8 2-9 % slower in this session's call 1.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_weights.sh ab    # ~6 min: spec A/B, a second tree process, the spec tests
#   bash scripts/_spec_weights.sh san   # same warm machine: memcheck + racecheck side by side,
#                                       # then ncu of the open rows (FAMILY=open256) on the tree
#   bash scripts/_spec_weights.sh all   # call 5, the merged form: A/B, then the spec tests and
#                                       # memcheck + racecheck at once (~7.5 min)
# Merge if no row loses beyond the spread and T = 4 or T = 8 gains in both processes.
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
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
  echo "[$((SECONDS - t0)) s] ab"
  timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 1,8,256,512 --spec-tokens 4,8 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
  grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -18
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
  timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -k spec > "$OUT/tests.log" 2>&1
  tail -4 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
san)
  [[ -n $(ls replayssm_ext/*.so 2>/dev/null) ]] || { echo "no tree build in place: the machine was not warm"; exit 1; }
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "spec_dtype_pairs or aligned_and_misaligned" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log
  FAMILY=open256 timeout 200 bash scripts/ncu_spec_profiles.sh
  echo "[$((SECONDS - t0)) s] ncu"
  ;;
all)
  # The second run (call 5): the A/B of the merged form (one head per CTA keeps the old tasks), then
  # the spec tests and the sanitizers on the tree build at once.
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
  echo "[$((SECONDS - t0)) s] ab"
  timeout 40 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 1,8,256 --spec-tokens 4,8 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
  grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -14
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
  timeout 200 python3 -m pytest -q -rs -n 12 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -k spec > "$OUT/tests.log" 2>&1 &
  for tool in memcheck racecheck; do
    # The changed form runs with two or four heads per CTA: a quad case and the forced pairs.
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "(spec_stream_quads and geo0) or (spec_full_windows and pairs) or (spec_optional_inputs and pairs)" \
      > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  tail -3 "$OUT/tests.log"
  for tool in memcheck racecheck; do
    echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] tests and sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
  ;;
esac
