#!/usr/bin/env bash
# Session 22 (prepared, delete before merging; keep with the results): the replay kernel requests
# the step's own inputs (x, B, C, dt and its bias) before the slot, so the new entry's ring write
# and the dot products with C no longer wait one memory latency after the cursors. Aim: the
# per-CTA chain of the stream-first non-flush rows (super's 4 stream iterations per CTA carry
# that chain over fewer bytes than nano's 5: 84.8 % vs 89.7 % of copy) and batch 1.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry ab_base)
#   bash scripts/_token_first.sh ab      # main vs the tree: decode both routes, nano + super,
#                                        # batch 1 / 8 / 64 / 256 / 512, two rounds (~6 min)
#   bash scripts/_token_first.sh tests   # same machine, warm: Mamba-2 GPU tests, sanitizers
# Merge if the output-only rows gain (batch 1, super batch 256) and nothing loses.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
if [[ ${1:-} == ab ]]; then
  BUILD_TIMEOUT=220 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
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
  echo "usage: bash scripts/_token_first.sh ab|tests" >&2; exit 2
fi
