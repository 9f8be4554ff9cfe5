#!/usr/bin/env bash
# Session 19 (delete before merging): the 8-token GDN spec tile at about one CTA per SM.
#   bash scripts/_s19_check.sh suite   # build, whole GPU suite, launcher vs the old tiling (T = 8)
#   bash scripts/_s19_check.sh san     # same machine, warm: memcheck + racecheck on the tiling forms
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
bench() {  # $1 log name, then benchmark arguments
  local name=$1; shift
  timeout 60 python3 -m replayssm_ext.benchmark --sections spec -B 16 --accept all --out "$OUT/b_$name" "$@" > "$OUT/b_$name.log" 2>&1
  echo "$name: $(grep -E '\] gdn_spec_cycle' "$OUT/b_$name.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
  rm -rf "$OUT/b_$name"
}
if [[ ${1:-} == suite ]]; then
  timeout 200 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] built"
  timeout 370 python3 -m pytest -q -n 16 tests > "$OUT/tests.log" 2>&1; tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] suite"
  # The launcher's tiling, then the old rule (two CTAs per SM) forced, grouped by its tile count.
  bench launcher --geometries qwen3.5-4b,qwen3.5-122b --batches 1,2,4,8,16,256 --spec-tokens 2,4,8
  REPLAYSSM_GDN_SPEC_TILES=8 bench old8_4b --geometries qwen3.5-4b --batches 1,2 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_TILES=8 bench old8_122b --geometries qwen3.5-122b --batches 1 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_TILES=4 bench old4_4b --geometries qwen3.5-4b --batches 4 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_TILES=4 bench old4_122b --geometries qwen3.5-122b --batches 2 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_TILES=2 bench old2_4b --geometries qwen3.5-4b --batches 8 --spec-tokens 8
  REPLAYSSM_GDN_SPEC_TILES=2 bench old2_122b --geometries qwen3.5-122b --batches 4 --spec-tokens 8
  echo "[$((SECONDS - t0)) s] bench"
  tar czf "$OUT/bench.tgz" -C "$OUT" $(cd "$OUT" && ls b_*.log) && rm -f "$OUT"/b_*.log
else
  for tool in memcheck racecheck; do
    timeout 250 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x tests/test_gdn_cuda.py \
      -k "spec_tiles or regs_override or stream_forms" > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
    echo "[$((SECONDS - t0)) s] $tool"
  done
fi
