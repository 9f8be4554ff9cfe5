#!/usr/bin/env bash
# Prepared in session 28 (delete before merging, keep with the results): the two-buffer dot-only
# state loop, written twice (the decode's stream-first rows, replay_kernel.cuh, and the spec
# verify's non-flush aligned-view CTAs, spec_kernel.cuh), as one TileStream::dots_two_buffers
# (tile.cuh) that both call. Same operations in the same order. Local sm_90a compiles against
# main 2a3e90d: the benchmarked instances (bf16 activations, N = 128) are instruction-for-instruction
# the same; mamba2_replay_fp32.cu's fp32-activation stream-first instances (6 of 90) differ only in
# FSEL operands swapped with the predicate negated and one operand-reuse flag; in
# mamba2_spec_fp32_t4.cu 12 of 112 instances (N = 256, and fp32 activations at N = 128) differ in
# register moves, same or +-32 instructions. No benchmark needed; it needs the GPU tests.
#   bash scripts/_dots_two_buffers.sh     # one call, ~6 min: build, both Mamba-2 test files,
#                                         # memcheck + racecheck of the two loops' forms at once
# Merge if every test passes and the sanitizers are clean.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
timeout 240 python3 -m pytest -q -rs -n 12 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "spec_vec_stream_forms or decode_stream_order_forms" > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
