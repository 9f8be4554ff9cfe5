#!/usr/bin/env bash
# Session 41, call 3: the 4-token spec instances at 7 CTAs per SM with the dot products in the
# fold's table (docs/prepared/m2-spec-t4-seven-ctas.patch) plus a lead of its own for folding CTAs
# (REPLAYSSM_M2_SPEC_L2_FOLD), against main (ab_base). Both builds, then processes alternating.
# carry .whl, ab_base
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --spec-tokens 4 --accept all --spec-phases --batches 64,256,512 --budget-s 60"
mkdir -p "$OUT/ab"
OUT=$OUT/ab BUILD_TIMEOUT=280 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
echo "[$((SECONDS - t0)) s] ab done"
BASE=/tmp/replayssm_ab_base
run() {  # label, dir, env...
  local label=$1 dir=$2; shift 2
  (cd "$dir" && env "$@" timeout 120 python3 -m replayssm_ext.benchmark $args --out "$OUT/runs/$label") > "$OUT/runs/$label.log" 2>&1
  echo "$label rc=$? [$((SECONDS - t0)) s] $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d['gates']; print('gates', sum(x['passed'] for x in g), 'of', len(g), 'errors', d['errors'])" "$OUT/runs/$label/bench.json" 2>&1)"
}
for r in 1 2; do
  run base_r$r $BASE X=1
  run tree_r$r . X=1
  run tree_f1_r$r . REPLAYSSM_M2_SPEC_L2_FOLD=1
  run tree_l0f1_r$r . REPLAYSSM_M2_SPEC_L2=0 REPLAYSSM_M2_SPEC_L2_FOLD=1
  run tree_l1f1_r$r . REPLAYSSM_M2_SPEC_L2=1 REPLAYSSM_M2_SPEC_L2_FOLD=1
  run tree_l3f1_r$r . REPLAYSSM_M2_SPEC_L2=3 REPLAYSSM_M2_SPEC_L2_FOLD=1
  run tree_f0_r$r . REPLAYSSM_M2_SPEC_L2_FOLD=0
  run base_l1_r$r $BASE REPLAYSSM_M2_SPEC_L2=1
done
python3 - "$OUT/runs" > "$OUT/summary.txt" <<'PY'
import json, sys, pathlib
root = pathlib.Path(sys.argv[1]); rows = {}
for d in sorted(p for p in root.iterdir() if p.is_dir()):
    for r in json.loads((d / "bench.json").read_text())["rows"]:
        if r["kernel"] in ("m2_spec_cycle", "m2_spec_flush", "m2_spec_nonflush"):
            rows.setdefault((r["kernel"], r["geometry"][:14], r["batch"]), {})[d.name] = r["us"]
labels = sorted({l for v in rows.values() for l in v})
print("kernel geometry batch " + " ".join(labels))
for k in sorted(rows):
    print(*k, *[f"{rows[k].get(l, float('nan')):.1f}" for l in labels])
PY
cat "$OUT/summary.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs ab && rm -rf "$OUT/runs" "$OUT/ab"
echo "[$((SECONDS - t0)) s] done"
