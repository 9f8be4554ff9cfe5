#!/usr/bin/env bash
# Session 54, GPU call 3: tree = the warp-rows kernel with its decay-weight scan and entry selection
# before the barrier (beside the copies' and the state's latency), against main (ab_base = b395d0b)
# at batch 1 / 2 / 8, B = 8 / 16, output-only; the warp-rows tests; then two variants on top, each
# A/B against the same base: v3 (the state rows used last, S0 . C reduced with the entries' terms)
# and v2 (the B copies unconditional, no branch per copy).
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AB="--sections m2 --routes output_only --batches 1,2,8 -B 8,16 --budget-s 60"
summary() { grep -E '^(tree|base):|gates' "$1" | head -4; sed -n '/us per step/,$p' "$1" | grep -E "m2_oo" | grep -E "    (1|2) " ; }
mkdir -p "$OUT/v1" "$OUT/v3" "$OUT/v2"
OUT=$OUT/v1 BENCH_TIMEOUT=120 scripts/ab_bench.sh $AB > "$OUT/v1/ab.txt" 2>&1
echo "== v1"; summary "$OUT/v1/ab.txt"; echo "v1 ab [$((SECONDS - t0)) s]"
timeout 90 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -k "warp_rows" > "$OUT/v1/tests.log" 2>&1
echo "v1 tests rc=$? [$((SECONDS - t0)) s]"; tail -n 2 "$OUT/v1/tests.log"
for v in v3-late-dots v2-uncond-copies; do
  d=$OUT/${v%%-*}
  (git apply bench/results/h100-2026-12-06-s54/$v.patch 2>/dev/null || patch -p1 < bench/results/h100-2026-12-06-s54/$v.patch > /dev/null) || { echo "$v: patch failed"; continue; }
  OUT=$d AB_KEEP_BASE=1 BENCH_TIMEOUT=120 scripts/ab_bench.sh $AB > "$d/ab.txt" 2>&1
  echo "== $v"; summary "$d/ab.txt"; echo "$v ab [$((SECONDS - t0)) s]"
  git apply -R bench/results/h100-2026-12-06-s54/$v.patch 2>/dev/null || patch -R -p1 < bench/results/h100-2026-12-06-s54/$v.patch > /dev/null
done
