#!/usr/bin/env bash
# Session 24 (prepared in session 23; delete before merging, keep with the results): the replay
# kernel's entries-first instances request the step's own inputs (x, two of B, C, dt and its
# bias) before the slot and hold them in registers; the stream-first instances read them where
# they are used, as main does. Session 23 measured the entries-first gain (batch 1 6.35 -> 6.06,
# state-and-output batch 256 -4 to -6 %) and the stream-first loss (nano batch 256 +5 %) of doing
# it everywhere (bench/results/h200-2026-12-01-s23-token-first).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry ab_base)
#   bash scripts/_inputs_first.sh ab      # main vs the tree: decode both routes, nano + super,
#                                         # batch 1 / 8 / 64 / 256 / 512, then a second tree process
#                                         # (both builds at once: ~4-5 min in all)
#   bash scripts/_inputs_first.sh tests   # same machine, warm: Mamba-2 GPU tests, sanitizers
# Merge if batch 1 / 8 and the state-and-output route gain, and the output-only rows at batch
# 64-512 stay level.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
if [[ ${1:-} == ab ]]; then
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'm2_(oo|so)_|m2_base|FAILED|rc=' "$OUT/ab.txt" | head -90
  echo "[$((SECONDS - t0)) s] ab"
  # A second process on the tree's build (left in place by ab_bench) for the spread.
  timeout 120 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --out "$OUT/tree2" > "$OUT/tree2.log" 2>&1
  grep -E 'gates:|\] m2_oo_(cycle|nonflush) ' "$OUT/tree2.log" | head -24
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* tree2*) && rm -rf "$OUT"/ab_* "$OUT"/tree2*
elif [[ ${1:-} == tests ]]; then
  timeout 240 python3 -m pytest -q -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py tests/test_dependent_launch.py \
    > "$OUT/tests.log" 2>&1
  tail -2 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "(decode_stream_order_forms and (odd or wide)) or decode_stream_orders_bit_identical" \
      > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
else
  echo "usage: bash scripts/_inputs_first.sh ab|tests" >&2; exit 2
fi
