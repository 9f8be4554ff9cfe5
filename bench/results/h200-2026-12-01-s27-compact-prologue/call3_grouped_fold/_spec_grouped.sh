#!/usr/bin/env bash
# Prepared in session 25, measured in session 26 (bench/results/h200-2026-12-01-s26-spec-grouped/,
# call 3 is this form; delete before merging, keep with the results): the Mamba-2 spec verify's
# fold (flush CTAs on the CUDA-core stream, T <= 4 with an fp32 checkpoint, and the 2-byte
# checkpoints) reads its left factors from the grouped table of the decode's rank update. The old
# [row][odd(R)] update, which only the spec kernel still used, is removed.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_grouped.sh                   # one call, ~6 min
# Merge if the T = 2 / 4 cycles at batch 64-512 gain and the rest stays level (session 26: super
# T = 4 lost 2.7 % to instruction-fetch stalls in its unchanged non-flush loop).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
ARGS=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${ARGS[@]}" > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
echo "[$((SECONDS - t0)) s] ab"
timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 256 --spec-tokens 2,4 --out "$OUT/tree2" > "$OUT/tree2.log" 2>&1
grep -E 'gates:|\] m2_spec_cycle ' "$OUT/tree2.log" | head -8
echo "[$((SECONDS - t0)) s] tree2"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* tree2*) && rm -rf "$OUT"/ab_* "$OUT"/tree2*
timeout 200 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
tail -4 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "spec_dtype_pairs" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] sanitizers"
tar czf "$OUT/tests.tgz" -C "$OUT" tests.log san_memcheck.log san_racecheck.log
