#!/usr/bin/env bash
# In-run A/B of the CUDA kernels: one run builds the kernels of a base revision, benchmarks them,
# builds the working tree's kernels and benchmarks those with the same arguments, so both numbers
# share the machine, its clocks and the copy-bandwidth yardstick. (Run-to-run spread of one build
# on the lent H200 is 1-3 %: as large as many kernel changes. docs/perf-notes.md, "Method notes".)
#
#   scripts/ab_bench.sh --prepare REV       where the git history is: REV's csrc/ into ab_base/
#                                            (git-ignored: name ab_base in the GPU run's carry)
#   scripts/ab_bench.sh BENCHMARK_ARGS...   on the GPU machine, from the repository root
#
# Only csrc/ is swapped: the Python package and the harness are the working tree's in both builds,
# and the working tree's build is the one left in place. Each benchmark writes $OUT/ab_<label>/
# (bench.json, table.txt, plots) and $OUT/ab_<label>.log, labels "base" and "tree"; the script then
# prints every timed row of both with the ratio tree / base. BENCHMARK_ARGS are those of
# `python3 -m replayssm_ext.benchmark` without --out, e.g.
#   --sections spec --geometries qwen3.5-4b --batches 256 -B 16 --spec-tokens 4,8 --accept all
#
# Environment: OUT (default ./out), REPLAYSSM_FAMILIES (e.g. gdn: one family builds in ~45 s on the
# GPU machine), TORCH_CUDA_ARCH_LIST (default 9.0a), MAX_JOBS (default 16), BUILD_TIMEOUT and
# BENCH_TIMEOUT (seconds, default 300 and 240).
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
[[ ! -e ab_tree_csrc ]] || { echo "ab_bench.sh: ab_tree_csrc exists (an earlier run's copy of csrc/?): move it back first" >&2; exit 2; }

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1

# The working tree's csrc/ waits in ab_tree_csrc/ while the base builds; it is put back on any exit.
restore() { if [[ -d ab_tree_csrc ]]; then rm -rf csrc && mv ab_tree_csrc csrc; fi; }
trap restore EXIT

build_and_bench() {  # label, benchmark args...
  local label=$1 t0=$SECONDS
  shift
  # ninja compares modification times: every source must look newer than the other build's objects.
  find csrc -type f -exec touch {} +
  if ! timeout "${BUILD_TIMEOUT:-300}" python3 setup.py build_ext --inplace >"$OUT/ab_${label}_build.log" 2>&1; then
    echo "$label: build FAILED"
    tail -n 30 "$OUT/ab_${label}_build.log"
    return 1
  fi
  echo "$label: built in $((SECONDS - t0)) s"
  t0=$SECONDS
  timeout "${BENCH_TIMEOUT:-240}" python3 -m replayssm_ext.benchmark "$@" --out "$OUT/ab_$label" >"$OUT/ab_$label.log" 2>&1
  local rc=$?
  echo "$label: benchmark rc=$rc in $((SECONDS - t0)) s"
  [[ $rc -eq 0 ]] || tail -n 20 "$OUT/ab_$label.log"
  return $rc
}

mv csrc ab_tree_csrc && cp -r ab_base/csrc csrc || exit 1
build_and_bench base "$@" || exit 1
restore
build_and_bench tree "$@" || exit 1

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
PY
