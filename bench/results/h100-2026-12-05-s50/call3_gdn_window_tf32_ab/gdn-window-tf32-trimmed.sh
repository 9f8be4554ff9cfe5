#!/usr/bin/env bash
# docs/prepared/gdn-window-tf32.patch measured: the GDN window products of an fp32 checkpoint as
# split-tf32 mma (m16n8k8, hi = x with its low 13 mantissa bits cleared, lo = x - hi) instead of
# split-bf16 (m16n8k16): two instructions per state value for the split instead of three, twice the
# mma. A/B of main (ab_base) against main + the patch (tree): spec verify T = 2, 4, 8 at batch 1 /
# 64 / 256 / 512 (Qwen3.5-4B, Qwen3.5-122B), all accepted, --spec-phases; then every GDN GPU test.
# Prepare where the git history is: scripts/ab_bench.sh --prepare HEAD; git apply
# docs/prepared/gdn-window-tf32.patch; cp docs/prepared/gdn-window-tf32.sh scripts/. Then on the GPU
# machine: bash scripts/gdn-window-tf32.sh (carry .whl, ab_base). Written in session 44, whose call
# of it was lost when the machine stopped answering.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
args="--sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --spec-tokens 2,4,8 --accept all --spec-phases --batches 1,256 --budget-s 35"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-160
grep -E '^gdn_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | head -80
echo "[$((SECONDS - t0)) s] ab done"
tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
timeout $((590 - SECONDS + t0)) python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rs -n 14 -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; grep -E "passed|failed" "$OUT/tests.log" | tail -n 2
