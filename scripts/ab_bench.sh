#!/usr/bin/env bash
# In-run A/B of the CUDA kernels: one run builds the kernels of a base revision and the working
# tree's at the same time, then benchmarks the base and the tree with the same arguments, so both
# numbers share the machine, its clocks and the copy-bandwidth yardstick. (Run-to-run spread of
# one build on the lent H200 is 1-3 %: as large as many kernel changes. docs/perf-notes.md,
# "Method notes".)
#
#   scripts/ab_bench.sh --prepare REV       where the git history is: REV's csrc/ into ab_base/
#                                            (git-ignored: name ab_base in the GPU run's carry)
#   scripts/ab_bench.sh BENCHMARK_ARGS...   on the GPU machine, from the repository root
#
# Only csrc/ differs: the base builds in a copy of the working tree (AB_BASE_DIR, default
# /tmp/replayssm_ab_base) whose csrc/ is ab_base/csrc, so the Python package and the harness are
# the working tree's in both, and the working tree's own build is the one left in place. Each
# benchmark writes $OUT/ab_<label>/ (bench.json, table.txt, plots) and $OUT/ab_<label>.log,
# labels "base" and "tree"; the script then prints every timed row of both with the ratio
# tree / base, and whether the benchmark gates' errors against the recurrence differ between the two
# (identical inputs: a change meant to keep every result bit-identical must keep them identical).
# BENCHMARK_ARGS are those of `python3 -m replayssm_ext.benchmark` without --out, e.g.
#   --sections spec --geometries qwen3.5-4b --batches 256 -B 16 --spec-tokens 4,8 --accept all
#
# Environment: OUT (default ./out), REPLAYSSM_FAMILIES (e.g. gdn: one family builds in ~45 s on the
# GPU machine), TORCH_CUDA_ARCH_LIST (default 9.0a), MAX_JOBS (default 16, per build),
# BUILD_TIMEOUT and BENCH_TIMEOUT (seconds, default 300 and 240), AB_BASE_DIR, AB_KEEP_BASE.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ ${1:-} == --prepare ]]; then
  rev=${2:?"usage: scripts/ab_bench.sh --prepare REV"}
  sha=$(git rev-parse --verify "$rev^{commit}") || exit 2
  rm -rf ab_base && mkdir -p ab_base
  git archive "$sha" csrc | tar -x -C ab_base || exit 1
  echo "$sha" >ab_base/REV
  echo "ab_base/csrc: csrc/ of $sha"
  exit 0
fi
for arg in "$@"; do
  [[ $arg == --out || $arg == --out=* ]] && { echo "ab_bench.sh: --out is set per build (\$OUT/ab_<label>)" >&2; exit 2; }
done
[[ -d ab_base/csrc ]] || { echo "ab_bench.sh: no ab_base/csrc: run scripts/ab_bench.sh --prepare REV first" >&2; exit 2; }

OUT=$(mkdir -p "${OUT:-$PWD/out}" && cd "${OUT:-$PWD/out}" && pwd)
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1

# The base builds in a copy of the working tree with ab_base/csrc as its csrc/ (outside the
# repository, so the tree's own build folder and in-place extension stay untouched), at the same
# time as the tree: the two builds share the machine's cores, which one build of a few long
# kernel files leaves partly idle. Each benchmark runs from its own folder, so Python imports
# that folder's package and extension.
BASE_DIR=${AB_BASE_DIR:-/tmp/replayssm_ab_base}
# AB_KEEP_BASE=1 (a second benchmark on the same machine) keeps a base folder made from the same
# ab_base: its csrc/ keeps its timestamps, so its build only re-links instead of compiling again.
if [[ ${AB_KEEP_BASE:-0} == 1 && -f $BASE_DIR/.ab_rev && $(cat "$BASE_DIR/.ab_rev") == "$(cat ab_base/REV)" ]]; then
  echo "base: keeping $BASE_DIR (ab_base $(cut -c1-12 ab_base/REV))"
else
  rm -rf "$BASE_DIR" && mkdir -p "$BASE_DIR" || exit 1
  tar -c --exclude=./.git --exclude=./build --exclude=./ab_base --exclude=./out --exclude='*.so' -f - . |
    tar -x -C "$BASE_DIR" || exit 1
  rm -rf "$BASE_DIR/csrc" && cp -r ab_base/csrc "$BASE_DIR/csrc" || exit 1
  cp ab_base/REV "$BASE_DIR/.ab_rev" || exit 1
fi

build() {  # label, folder
  local label=$1 dir=$2 t0=$SECONDS
  if ! (cd "$dir" && timeout "${BUILD_TIMEOUT:-300}" python3 setup.py build_ext --inplace) >"$OUT/ab_${label}_build.log" 2>&1; then
    echo "$label: build FAILED"
    tail -n 30 "$OUT/ab_${label}_build.log"
    return 1
  fi
  echo "$label: built in $((SECONDS - t0)) s"
}

bench() {  # label, folder, benchmark args...
  local label=$1 dir=$2 t0=$SECONDS
  shift 2
  (cd "$dir" && timeout "${BENCH_TIMEOUT:-240}" python3 -m replayssm_ext.benchmark "$@" --out "$OUT/ab_$label") \
    >"$OUT/ab_$label.log" 2>&1
  local rc=$?
  echo "$label: benchmark rc=$rc in $((SECONDS - t0)) s"
  [[ $rc -eq 0 ]] || tail -n 20 "$OUT/ab_$label.log"
  return $rc
}

build base "$BASE_DIR" & base_pid=$!
build tree "$PWD" & tree_pid=$!
wait $base_pid; base_rc=$?
wait $tree_pid; tree_rc=$?
((base_rc == 0 && tree_rc == 0)) || exit 1
bench base "$BASE_DIR" "$@" || exit 1
bench tree "$PWD" "$@" || exit 1

python3 - "$OUT/ab_base/bench.json" "$OUT/ab_tree/bench.json" "$(cat ab_base/REV 2>/dev/null)" <<'PY'
import json, sys
base_path, tree_path, rev = sys.argv[1:4]
KEY = ("section", "kernel", "geometry", "batch", "B", "T", "accept", "route")
def rows(path):
    with open(path) as f:
        return {tuple(r.get(k) for k in KEY): r["us"] for r in json.load(f)["rows"]}
base, tree = rows(base_path), rows(tree_path)
print(f"\nus per step: base = {rev[:12] or 'ab_base'}, tree = the working tree (ratio < 1: the tree is faster)")
print(f"{'kernel':<22} {'geometry':<20} {'batch':>5} {'B':>4} {'T':>3} {'accept':<8} {'route':<16} "
      f"{'base us':>10} {'tree us':>10} {'tree/base':>9}")
for key in sorted(tree, key=str):
    if key in base:
        r = {k: ("-" if v is None else v) for k, v in zip(KEY, key)}
        print(f"{r['kernel']:<22} {r['geometry']:<20} {r['batch']:>5} {r['B']:>4} {r['T']:>3} {r['accept']:<8} "
              f"{r['route']:<16} {base[key]:>10.2f} {tree[key]:>10.2f} {tree[key] / base[key]:>9.3f}")
missing = sorted(set(base) ^ set(tree), key=str)
if missing:
    print(f"{len(missing)} row(s) timed in only one of the two runs")
# The benchmark's gates against the recurrence: the same inputs in both runs, so a change that
# should leave every result bit-identical (a reordered load, a rescheduled copy) must leave every
# gate's errors identical too.
# The decode sections' gates carry no T or accept.
def gates(path):
    with open(path) as f:
        return {(g["check"], g["kernel"], g["geometry"], g["batch"], g.get("T"), g.get("accept")): g for g in json.load(f)["gates"]}
gb, gt = gates(base_path), gates(tree_path)
fields = ("out_abs", "out_rel", "state_abs", "state_rel")
differ = [k for k in gt if k in gb and any(gt[k][f] != gb[k][f] for f in fields)]
print(f"gates: {sum(g['passed'] for g in gt.values())} of {len(gt)} passed in the tree, "
      f"{sum(g['passed'] for g in gb.values())} of {len(gb)} in the base; errors differ in {len(differ)}: {differ[:6]}")
PY
