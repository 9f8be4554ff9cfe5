#!/usr/bin/env bash
# Session 24 (delete before merging, keep with the results): the replay kernel's stream-first
# instances are compiled for 16-byte aligned state views (the launcher sends other views to the
# entries-first instance) and the output-only non-flush rows get a loop of their own that only
# forms the dot products with C (no scale, no update, no store test). SASS of the nano instance:
# ~95 instructions per stream iteration against ~180 (the decode256 profile, call 3).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry ab_base)
#   bash scripts/_dot_stream.sh ab      # main vs the tree, all families built (the tests call
#                                       # needs GDN for the launch tests): decode both routes
#   bash scripts/_dot_stream.sh tests   # same machine, warm: Mamba-2 + launch tests, sanitizers
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
if [[ ${1:-} == ab ]]; then
  BUILD_TIMEOUT=420 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
  grep -E 'm2_(oo|so)_|m2_base|FAILED|rc=|built' "$OUT/ab.txt" | head -90
  echo "[$((SECONDS - t0)) s] ab"
  timeout 120 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --out "$OUT/tree2" > "$OUT/tree2.log" 2>&1
  grep -E 'gates:|\] m2_oo_(cycle|nonflush) ' "$OUT/tree2.log" | head -24
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* tree2*) && rm -rf "$OUT"/ab_* "$OUT"/tree2*
elif [[ ${1:-} == tests ]]; then
  timeout 300 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py tests/test_dependent_launch.py \
    > "$OUT/tests.log" 2>&1
  tail -25 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "(decode_stream_order_forms and (odd or wide)) or decode_stream_orders_bit_identical or decode_stream_order_whole_heads" \
      > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
else
  echo "usage: bash scripts/_dot_stream.sh ab|tests" >&2; exit 2
fi
