#!/usr/bin/env bash
# Prepared in session 16 (not run; delete before merging): the GDN window kernel's partial sums
# keyed by row (WindowPartials::slot) against main, same run (scripts/ab_bench.sh, GDN only), then
# the GDN GPU tests and the sanitizers on the tensor-core window paths. ~7 min.
#   here:  scripts/ab_bench.sh --prepare HEAD~0   (main, before applying the patch: ab_base/ is carried)
#   GPU:   bash scripts/_gdn_part_key.sh          (carry: .whl, ab_base)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$SECONDS
bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b --batches 64,256 -B 16 \
  --spec-tokens 2,4,8 --accept all 2>&1 | tail -40
echo "[$((SECONDS - t0)) s] A/B fp32 checkpoint"
timeout 120 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b --batches 256 -B 16 \
  --spec-tokens 2,4,8 --accept all --state-dtype bf16 > "$OUT/tree_bf16.log" 2>&1; grep -E '^gdn_spec_cycle' "$OUT/tree_bf16.log"
echo "[$((SECONDS - t0)) s] bf16 checkpoint (tree only; base: perf-notes, session 10)"
timeout 200 python3 -m pytest -q -n 16 tests/test_gdn_cuda.py tests/test_gdn_ops.py > "$OUT/tests.log" 2>&1; tail -2 "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x tests/test_gdn_cuda.py \
    -k "test_spec_matches_cpu_op" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] done"
