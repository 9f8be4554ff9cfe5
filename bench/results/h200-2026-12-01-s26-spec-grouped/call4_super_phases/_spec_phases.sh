#!/usr/bin/env bash
# Session 26 (delete before merging; kept with the results): why the grouped spec fold gains at
# T = 2 and loses at T = 4 (call 1: nano batch 256 T = 2 337.4 -> 328.6, T = 4 414.6 -> 426.8).
# Builds main (ab_base) and the tree, then times each phase alone with bench/profile_step.py
# (eager, CUDA events) in alternating processes, and profiles the T = 4 flush launch of both.
# Call 4 (the one-loop fill): GEOMS=nemotron3-super-120b PHASES="--T 4 --hist 8|--T 4 --hist 12 --flush"
# NCU_ARGS="--geometry nemotron3-super-120b --T 4 --hist 8" (super's T = 4 cycle still 2.7 % slower).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections spec --geometries ${GEOMS:-nemotron3-nano-4b,nemotron3-super-120b} \
  -B 16 --batches 256 --spec-tokens ${AB_TOKENS:-2,4} --accept all > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}'
echo "[$((SECONDS - t0)) s] ab"
GEOMS=${GEOMS:-nemotron3-nano-4b,nemotron3-super-120b}
TREE=$PWD BASE=${AB_BASE_DIR:-/tmp/replayssm_ab_base}
phase() {  # label dir args...
  local label=$1 dir=$2; shift 2
  (cd "$dir" && PYTHONPATH=$dir:/tmp/site timeout 60 python3 bench/profile_step.py --op mamba2_spec_verify --iters 40 "$@" 2>&1 |
     tail -1 | sed "s/^/$label /")
}
IFS='|' read -ra PHASE_LIST <<< "${PHASES:---T 4 --hist 8|--T 4 --hist 12 --flush|--T 4 --hist 4|--T 2 --hist 8|--T 2 --hist 14 --flush}"
for g in ${GEOMS//,/ }; do
  for args in "${PHASE_LIST[@]}"; do
    for rep in 1 2; do
      phase base "$BASE" --geometry $g --batch 256 $args
      phase tree "$TREE" --geometry $g --batch 256 $args
    done
  done
done | tee "$OUT/phases.txt"
echo "[$((SECONDS - t0)) s] phases"
W=$(mktemp -d)
for label in base tree; do
  dir=$TREE; [[ $label == base ]] && dir=$BASE
  (cd "$dir" && PYTHONPATH=$dir:/tmp/site timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters \
     --section LaunchStats --section Occupancy -k regex:mamba2_spec_verify_kernel --launch-skip 3 --launch-count 1 -o "$W/$label" \
     python3 bench/profile_step.py --op mamba2_spec_verify --batch 256 ${NCU_ARGS:---geometry nemotron3-nano-4b --T 4 --hist 12 --flush} > "$W/$label.run.log" 2>&1)
  ncu --import "$W/$label.ncu-rep" --page details > "$W/$label.details.txt" 2>&1
  ncu --import "$W/$label.ncu-rep" --page source --csv --print-source sass > "$W/$label.source.csv" 2>&1
  python3 bench/ncu_hotspots.py "$W/$label.source.csv" --window 80 --top 12 --show 2 > "$W/$label.hotspots.txt" 2>&1
  python3 - "$W/$label.source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, data = rows[1], rows[2:]
cols = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
tot = {hdr[i]: sum(float(r[i] or 0) for r in data) for i in cols}
s = sum(tot.values()) or 1
ie = hdr.index("Instructions Executed")
print("samples", int(s), "instructions", int(sum(float(r[ie] or 0) for r in data)),
      " ".join(f"{k[6:]}={v / s * 100:.1f}%" for k, v in tot.items() if v / s > 0.01))
PY
  echo "== $label"; grep -E "Duration|Registers Per|Achieved Occupancy|Executed Ipc A|Issue Slots Busy" "$W/$label.details.txt" | head -8
done
rm -f "$W"/*.ncu-rep; tar czf "$OUT/ncu.tgz" -C "$W" .
echo "[$((SECONDS - t0)) s] ncu"
