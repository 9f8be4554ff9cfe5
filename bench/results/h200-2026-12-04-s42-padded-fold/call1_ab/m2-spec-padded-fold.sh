#!/usr/bin/env bash
# Measures docs/prepared/m2-spec-padded-fold.patch (written in session 41, compile-checked only).
# Copy to scripts/, then here:
#   scripts/ab_bench.sh --prepare HEAD && git apply docs/prepared/m2-spec-padded-fold.patch
# and on the GPU machine (carry .whl, ab_base), in two calls (each under the 600 s limit):
#   STAGE=ab bash scripts/m2-spec-padded-fold.sh         # ~360 s: the A/B by phase and the spec tests
#   STAGE=sanitize bash scripts/m2-spec-padded-fold.sh   # ~330 s on a fresh machine (builds the tree first)
# 1. A/B, main (base) against the patch (tree), Mamba-2-only builds, the spec section at T = 4 with the
#    cycle split into its phases, nano and super, B = 16, all accepted, batch 1 / 64 / 256 / 512; then
#    two more processes per build, alternating (the T = 2 / 8 instances are main's SASS: not timed);
# 2. the tree's Mamba-2 spec GPU tests (test_spec_vec_stream_forms has two new cases with R = 14, 15);
# 3. memcheck and racecheck on test_spec_vec_stream_forms (12 cases; they cover session 41's merged
#    flush loop too, which no sanitizer has run).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
if [[ ${STAGE:-ab} == sanitize ]]; then
  STAGES=build,sanitize SANITIZE_ARGS="tests/test_mamba2_cuda.py -k test_spec_vec_stream_forms" \
    timeout 570 bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  echo "sanitize [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed|RACECHECK" "$OUT"/sanitize*.log | tail -6
  exit 0
fi
args="--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --spec-tokens 4 --accept all --spec-phases --batches 1,64,256,512 --budget-s 60"
mkdir -p "$OUT/ab" "$OUT/runs"
OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt"
grep -E '^m2_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | grep -E ' (1|256|512) '
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
            rows.setdefault((r["kernel"], r["geometry"], r["batch"]), {})[d.name] = r["us"]
labels = sorted({l for v in rows.values() for l in v})
print("kernel geometry batch " + " ".join(labels))
for k in sorted(rows):
    print(*k, *[f"{rows[k].get(l, float('nan')):.2f}" for l in labels])
PY
cat "$OUT/summary.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs ab && rm -rf "$OUT/runs" "$OUT/ab"
timeout $((560 - SECONDS + t0)) python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 -k spec \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 4 "$OUT/tests.log"
