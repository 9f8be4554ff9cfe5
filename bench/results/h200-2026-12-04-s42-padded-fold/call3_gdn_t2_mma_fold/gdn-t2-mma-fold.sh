#!/usr/bin/env bash
# Measures the GDN window kernel's 2-token tile folding on tensor cores (kWindowMmaFoldOnly: fp32
# checkpoint, bf16 activations; the window products stay on the CUDA cores). Here:
#   scripts/ab_bench.sh --prepare HEAD      (main, before the change)
# and on the GPU machine (carry .whl, ab_base), in two calls:
#   STAGE=ab bash scripts/gdn-t2-mma-fold.sh         # A/B by phase, alternating processes, GDN spec tests
#   STAGE=sanitize bash scripts/gdn-t2-mma-fold.sh   # memcheck and racecheck on test_spec_mma_fold_t2
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
if [[ ${STAGE:-ab} == sanitize ]]; then
  STAGES=build,sanitize SANITIZE_ARGS="tests/test_gdn_cuda.py -k test_spec_mma_fold_t2" \
    timeout 570 bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  echo "sanitize [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed|RACECHECK" "$OUT"/sanitize*.log | tail -6
  exit 0
fi
args="--sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --spec-tokens 2 --accept all,mean2.5 --spec-phases --batches 1,64,256,512 --budget-s 60"
mkdir -p "$OUT/ab" "$OUT/runs"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
grep -E '^gdn_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | grep -E ' (1|256) '
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
        if r["kernel"] in ("gdn_spec_cycle", "gdn_spec_flush", "gdn_spec_nonflush"):
            rows.setdefault((r["kernel"], r["geometry"], r.get("accept", ""), r["batch"]), {})[d.name] = r["us"]
labels = sorted({l for v in rows.values() for l in v})
print("kernel geometry accept batch " + " ".join(labels))
for k in sorted(rows, key=str):
    print(*k, *[f"{rows[k].get(l, float('nan')):.2f}" for l in labels])
PY
cat "$OUT/summary.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs ab && rm -rf "$OUT/runs" "$OUT/ab"
timeout $((570 - SECONDS + t0)) python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rs -n 14 -k spec \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 4 "$OUT/tests.log"
