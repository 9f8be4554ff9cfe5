#!/usr/bin/env bash
# Where a spec-verify kernel spends its time: Nsight Compute on one launch per case, batch 256,
# every row at one phase, the launcher's choices. For each case it leaves in $OUT/ncu_spec.tgz the
# ncu details page (speed of light, occupancy, warp states), the source page as CSV and
# bench/ncu_hotspots.py's table of the hottest SASS windows. Run from the repository root on the
# GPU machine after a build (or with BUILD=1).
#
#   BUILD=1 scripts/ncu_spec_profiles.sh              # Mamba-2, ~4 min with the build
#   FAMILY=gdn scripts/ncu_spec_profiles.sh           # GDN's window kernel (not yet run)
#
# Mamba-2 (nano; session 15 ran it, bench/results/h200-2026-11-30-s15-spec-stream/call2_ncu/): the
# spec kernel's CUDA-core stream at T = 4 non-flush (hist 8) and flush (hist 12), T = 2 non-flush.
# GDN (Qwen3.5-4B): the window kernel at T = 4 non-flush and flush (the v-head pairs with the L2
# lead), T = 2 non-flush.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"; W=$(mktemp -d /tmp/ncu_spec.XXXXXX)
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
shopt -s nullglob; wheels=(.whl/*.whl); shopt -u nullglob
if [[ ${#wheels[@]} -gt 0 ]]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "${wheels[@]}" && export PYTHONPATH=/tmp/site
fi
if [[ ${BUILD:-0} == 1 ]]; then
  timeout 300 python3 setup.py build_ext --inplace > "$W/build.log" 2>&1 || { tail -40 "$W/build.log"; exit 1; }
fi
command -v ncu >/dev/null || { echo "ncu not on PATH"; exit 1; }
case ${FAMILY:-mamba2} in
  mamba2) kernel=mamba2_spec_verify_kernel op=mamba2_spec_verify geometry=nemotron3-nano-4b ;;
  gdn) kernel=gdn_window_kernel op=gdn_spec_verify geometry=qwen3.5-4b ;;
  *) echo "FAMILY must be mamba2 or gdn"; exit 2 ;;
esac
run_case() {  # name, profile_step arguments...
  local name=$1; shift
  echo "== $name: $*"
  timeout 150 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SourceCounters -k regex:$kernel --launch-skip 3 --launch-count 1 \
    -o "$W/$name" python3 bench/profile_step.py --op $op --geometry $geometry \
    --batch 256 "$@" > "$W/$name.run.log" 2>&1 || { echo "ncu failed ($name)"; tail -20 "$W/$name.run.log"; return; }
  ncu --import "$W/$name.ncu-rep" --page details > "$W/$name.details.txt" 2>&1
  ncu --import "$W/$name.ncu-rep" --page source --csv --print-source sass > "$W/$name.source.csv" 2>&1
  python3 bench/ncu_hotspots.py "$W/$name.source.csv" --window 80 --top 12 --show 2 > "$W/$name.hotspots.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per Thread|Achieved Occupancy|Block Limit" "$W/$name.details.txt" | head -12
  head -20 "$W/$name.hotspots.txt"
}
run_case t4_nonflush --T 4 --hist 8
run_case t4_flush --T 4 --hist 12 --flush
run_case t2_nonflush --T 2 --hist 8
rm -f "$W"/*.ncu-rep
tar czf "$OUT/ncu_spec.tgz" -C "$W" .
echo "files in $OUT/ncu_spec.tgz"
