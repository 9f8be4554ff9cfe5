# Sourced by the one-off scripts of a GPU call (docs/prepared/*.sh), from the repository root: OUT
# (default ./out) created, the build and Python environment of a GPU run (sm_90a, 16 compile jobs,
# unbuffered output), the wheels in .whl/ (the machine has no network: nvidia-cutlass) installed
# into /tmp/site on PYTHONPATH, and t0 for the scripts' elapsed-time stamps. Which kernel families
# to build (REPLAYSSM_FAMILIES) is the calling script's choice.
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS

# ab_compare FOLDER BENCHMARK_ARGS...: scripts/ab_bench.sh (ab_base against the working tree) with
# those arguments into $OUT/FOLDER, its report in $OUT/FOLDER.txt; prints the elapsed time, the
# gates' line and the report's rows that match AB_ROWS (default: the Mamba-2 decode routes' rows).
# AB_KEEP_BASE=1 keeps the base build of an earlier comparison in the same call.
ab_compare() {
  local dir=$1; shift
  OUT=$OUT/$dir scripts/ab_bench.sh "$@" > "$OUT/$dir.txt" 2>&1
  echo "$dir rc=$? [$((SECONDS - t0)) s]"; grep -E 'FAILED|^gates' "$OUT/$dir.txt" | cut -c1-160
  grep -E "${AB_ROWS:-^m2_(so|oo)_(cycle|nonflush|flush) }" "$OUT/$dir.txt"
}
