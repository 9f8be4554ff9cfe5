#!/usr/bin/env bash
# Session 41, call 5: the spec verify's flush loop on the aligned-view stream loading the next
# iteration into raw (no second set of load registers) against main (ab_base), T = 4 by phase, two
# more processes per build alternating; then the tree's Mamba-2 spec tests. carry .whl, ab_base
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT/runs" "$OUT/ab"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
args="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --spec-tokens 4 --accept all --spec-phases --batches 1,64,256,512 --budget-s 60"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
grep -E '^m2_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | grep -E ' (256|512) '
echo "[$((SECONDS - t0)) s] ab done"
run() {  # label, dir
  (cd "$2" && timeout 90 python3 -m replayssm_ext.benchmark $args --out "$OUT/runs/$1") > "$OUT/runs/$1.log" 2>&1
  echo "$1 rc=$? [$((SECONDS - t0)) s]"
}
run base_r2 /tmp/replayssm_ab_base; run tree_r2 .; run tree_r3 .; run base_r3 /tmp/replayssm_ab_base
python3 - "$OUT/runs" > "$OUT/summary.txt" <<'PY'
import json, sys, pathlib
root = pathlib.Path(sys.argv[1]); rows = {}
for d in sorted(p for p in root.iterdir() if p.is_dir()):
    data = json.loads((d / "bench.json").read_text())
    print(d.name, "gates", sum(g["passed"] for g in data["gates"]), "of", len(data["gates"]), "errors", data["errors"])
    for r in data["rows"]:
        if r["kernel"] in ("m2_spec_cycle", "m2_spec_flush", "m2_spec_nonflush"):
            rows.setdefault((r["kernel"], r["geometry"][:14], r["batch"]), {})[d.name] = r["us"]
labels = sorted({l for v in rows.values() for l in v})
print("kernel geometry batch " + " ".join(labels))
for k in sorted(rows):
    print(*k, *[f"{rows[k].get(l, float('nan')):.2f}" for l in labels])
PY
cat "$OUT/summary.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs ab && rm -rf "$OUT/runs" "$OUT/ab"
left=$((345 - SECONDS + t0))
timeout $left python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 -k spec \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 4 "$OUT/tests.log"
