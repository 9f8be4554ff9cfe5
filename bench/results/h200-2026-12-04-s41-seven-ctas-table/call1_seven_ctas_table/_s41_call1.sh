#!/usr/bin/env bash
# Measures docs/prepared/m2-spec-t4-seven-ctas.patch (written in session 40, compile-checked only).
# Copy to scripts/, then here:
#   scripts/ab_bench.sh --prepare HEAD && git apply docs/prepared/m2-spec-t4-seven-ctas.patch
# and on the GPU machine (carry .whl, ab_base):
#   bash scripts/m2-spec-t4-seven-ctas.sh
# 1. A/B, main (base) against the patch (tree), Mamba-2-only builds, the spec section with the cycle
#    split into its phases: nano and super, T = 2 / 4 / 8, B = 16, all accepted, batch 1 / 8 / 64 /
#    256 / 512, two rounds (the second only relinks);
# 2. the tree's Mamba-2 spec tests;
# 3. memcheck and racecheck on the vec-stream forms (the flush and non-flush CTAs of the T = 4 pairs).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
geos=nemotron3-nano-4b,nemotron3-super-120b
for round in 1 2; do
  mkdir -p "$OUT/r$round"
  OUT=$OUT/r$round AB_KEEP_BASE=$((round - 1)) BUILD_TIMEOUT=260 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh \
    --sections spec --geometries $geos -B 16 --spec-tokens 2,4,8 --accept all --spec-phases \
    --batches 1,8,64,256,512 --budget-s 100 > "$OUT/ab_r$round.txt" 2>&1
  grep -E 'rc=|built|FAILED|keeping' "$OUT/ab_r$round.txt"; grep '^gates:' "$OUT/ab_r$round.txt"
  echo "[$((SECONDS - t0)) s] round $round"
done
grep -E '^m2_spec_(cycle|flush|nonflush) ' "$OUT/ab_r1.txt" | grep -E ' (256|512) ' | head -40
tar czf "$OUT/ab.tgz" -C "$OUT" r1 r2 && rm -rf "$OUT"/r1 "$OUT"/r2
timeout $((420 - SECONDS + t0)) python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 -k spec \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 4 "$OUT/tests.log"
left=$((585 - SECONDS + t0))
(( left > 60 )) && STAGES=sanitize SANITIZE_ARGS="tests/test_mamba2_cuda.py -k test_spec_vec_stream_forms" \
  timeout $left bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
echo "sanitize [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed|RACECHECK" "$OUT"/sanitize*.log | tail -6
