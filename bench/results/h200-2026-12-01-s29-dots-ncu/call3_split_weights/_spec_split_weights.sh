#!/usr/bin/env bash
# Session 29 (delete before merging, keep with the results): pair CTAs of the Mamba-2 spec
# verify's CUDA-core stream run the decay-weight tasks on their last warp(s) and the B_k . C_i rows
# on the others, side by side, instead of both on warp 0 in turn (ncu, super T = 4 non-flush:
# 8.8 % of warp samples waiting at the barrier after B_k . C_i). One-head and tensor-core
# instances keep main's SASS (local sm_90a compile of mamba2_spec_fp32_t4.cu: the 56 one-head
# instances identical; the benchmarked pair instance 4728 -> 4544 instructions, no new spills).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_spec_split_weights.sh   # ~8 min: spec A/B, a second tree process, then the spec
#                                         # tests and memcheck + racecheck of the pair forms at once
# Merge if no row loses beyond the spread and super T = 4 at batch 256 gains in both processes.
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
timeout 40 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --batches 8,64,256 --spec-tokens 2,4 --out "$OUT/ab_tree2" > "$OUT/ab_tree2.log" 2>&1
grep -E 'gates:|\] m2_spec_cycle ' "$OUT/ab_tree2.log" | head -14
echo "[$((SECONDS - t0)) s] tree2"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 200 python3 -m pytest -q -rs -n 12 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -k spec > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  # The changed form runs with two heads per CTA on the CUDA cores: the forced pairs.
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_mamba2_cuda.py -k "(spec_full_windows and pairs) or (spec_optional_inputs and pairs)" \
    > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
