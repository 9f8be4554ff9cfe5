#!/usr/bin/env bash
# Session 40, call 1 (delete before merging, keep with the results):
#  1. A/B of main (base) against docs/prepared/m2-decode-state-after-staging.patch (tree): the m2
#     section, nano and super, batch 1 / 8 / 64 / 256, B = 16, both routes, two rounds;
#  2. the spec verify's cycle split into its non-flush steps and its flush step (--spec-phases),
#     nano and super, T = 2 / 4 / 8, batch 64 / 256, all accepted, on the tree's build (the spec
#     kernel is the same in both).
#   scripts/ab_bench.sh --prepare HEAD      # here (carry .whl, ab_base)
#   bash scripts/_s40_call1.sh
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
    --sections m2 --geometries $geos -B 16 --batches 1,8,64,256 --budget-s 100 > "$OUT/ab_r$round.txt" 2>&1
  grep -E 'rc=|built|FAILED|keeping' "$OUT/ab_r$round.txt" | head
  grep '^gates:' "$OUT/ab_r$round.txt"
  echo "[$((SECONDS - t0)) s] round $round"
done
tar czf "$OUT/ab.tgz" -C "$OUT" r1 r2 && rm -rf "$OUT"/r1 "$OUT"/r2
timeout $((585 - SECONDS + t0)) python3 -m replayssm_ext.benchmark --sections spec --geometries $geos -B 16 \
  --batches 64,256 --spec-tokens 2,4,8 --accept all --spec-phases --budget-s $((560 - SECONDS + t0)) \
  --out "$OUT/spec_phases" > "$OUT/spec_phases.log" 2>&1
echo "spec phases rc=$? [$((SECONDS - t0)) s]"
grep -E "spec_(cycle|nonflush|flush)|copy" "$OUT/spec_phases.log" | head -60
tar czf "$OUT/spec_phases.tgz" -C "$OUT" spec_phases && rm -rf "$OUT/spec_phases"
