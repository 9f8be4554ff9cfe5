#!/usr/bin/env bash
# Session 25 (delete before merging, keep with the results): the replay kernel's rank update reads
# its left factors from a grouped table (TileStream::grouped_row: the U rows a thread updates are
# adjacent), one U-float shared load per entry instead of U loads. Compile-only: the nano / super
# instances' unrolled update loop 98 -> 82 instructions per four entries (20 -> 8 shared loads),
# the stream-first N = 128 instance's spills 24 / 40 -> 0 / 0 bytes. Targets: the flush step
# (1.12-1.13x the classic step against 1.1x) and the state-and-output route, both issue-bound.
#   scripts/ab_bench.sh --prepare <base>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_grouped_factors.sh       # one call: A/B, second tree process, tests, sanitizers
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --routes output_only,state_and_output)
BUILD_TIMEOUT=300 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'm2_(oo|so)_(flush|cycle|nonflush)|m2_base|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$(NF-2),$(NF-1),$NF}' | head -80
echo "[$((SECONDS - t0)) s] ab"
timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 256,512 --out "$OUT/tree2" > "$OUT/tree2.log" 2>&1
grep -E 'gates:|\] m2_(oo_flush|so_cycle|so_flush|base) .*batch=(256|512) ' "$OUT/tree2.log" | head -12
echo "[$((SECONDS - t0)) s] tree2"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* tree2*) && rm -rf "$OUT"/ab_* "$OUT"/tree2*
timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 70 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "aligned_and_misaligned or long_run_mixed or (decode_stream_order_forms and odd)" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
