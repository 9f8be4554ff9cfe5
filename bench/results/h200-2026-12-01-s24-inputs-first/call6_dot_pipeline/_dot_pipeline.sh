#!/usr/bin/env bash
# Session 24 (delete before merging, keep with the results): the replay kernel's dot-only stream
# (stream-first instances, output-only non-flush rows) with two iterations of loads in flight per
# warp: even / odd iterations in two buffers, each refilled after its own dot products, the loads
# clamped to the last row instead of branching. One call: main vs the tree (Mamba-2 kernels only),
# a second tree process, then the Mamba-2 GPU tests and memcheck / racecheck on the tree's build.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_dot_pipeline.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
BUILD_TIMEOUT=260 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'm2_oo_|m2_base .* 256 |FAILED|rc=|built' "$OUT/ab.txt" | head -60
echo "[$((SECONDS - t0)) s] ab"
timeout 90 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --out "$OUT/tree2" > "$OUT/tree2.log" 2>&1
grep -E 'gates:|\] m2_oo_(cycle|nonflush) .*batch=(256|512)' "$OUT/tree2.log" | head -12
echo "[$((SECONDS - t0)) s] tree2"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* tree2*) && rm -rf "$OUT"/ab_* "$OUT"/tree2*
timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "(decode_stream_order_forms and (odd or wide)) or decode_stream_orders_bit_identical" \
    > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
