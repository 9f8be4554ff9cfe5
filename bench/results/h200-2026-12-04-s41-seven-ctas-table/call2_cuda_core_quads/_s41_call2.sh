#!/usr/bin/env bash
# Session 41, call 2: four heads per CTA on the aligned-view CUDA-core stream at T = 4 (forced by
# REPLAYSSM_M2_SPEC_HEADS=4) against the launcher's pairs, one build, by phase; then the quads'
# L2 lead. carry .whl
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo build FAILED; tail -30 "$OUT/build.log"; exit 1; }
echo "built [$((SECONDS - t0)) s]"
args="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --spec-tokens 4 --accept all --spec-phases --batches 64,256,512 --budget-s 60"
run() {  # label, env...
  local label=$1; shift
  env "$@" timeout 120 python3 -m replayssm_ext.benchmark $args --out "$OUT/runs/$label" > "$OUT/runs/$label.log" 2>&1
  echo "$label rc=$? [$((SECONDS - t0)) s]"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d['gates']; print('  gates', sum(x['passed'] for x in g), 'of', len(g), 'errors', d['errors'])" "$OUT/runs/$label/bench.json"
}
for r in 1 2; do
  run pairs_r$r X=1
  run quads_r$r REPLAYSSM_M2_SPEC_HEADS=4
done
for l in 0 1 3; do run quads_l2_$l REPLAYSSM_M2_SPEC_HEADS=4 REPLAYSSM_M2_SPEC_L2=$l; done
run pairs_r3 X=1
python3 - "$OUT/runs" <<'PY'
import json, sys, pathlib
root = pathlib.Path(sys.argv[1]); rows = {}
for d in sorted(p for p in root.iterdir() if p.is_dir()):
    data = json.loads((d / "bench.json").read_text())
    for r in data.get("rows", []):
        if r.get("kernel", "") in ("m2_spec_cycle", "m2_spec_flush", "m2_spec_nonflush"):
            key = (r["kernel"], r.get("geometry"), r.get("batch"))
            rows.setdefault(key, {})[d.name] = r.get("us")
labels = sorted({l for v in rows.values() for l in v})
print("kernel geometry batch " + " ".join(labels))
for k in sorted(rows):
    print(*k, *[f"{rows[k].get(l, float('nan')):.1f}" for l in labels])
PY
