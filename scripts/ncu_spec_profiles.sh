#!/usr/bin/env bash
# Where a kernel spends its time: Nsight Compute on one launch per case, every row at one phase,
# the launcher's choices (spec verify at batch 256; FAMILY=batch1: the decode kernels at batch 1). For each case it leaves in $OUT/ncu_spec.tgz the
# ncu details page (speed of light, occupancy, warp states), the source page as CSV and
# bench/ncu_hotspots.py's table of the hottest SASS windows. Run from the repository root on the
# GPU machine after a build (or with BUILD=1).
#
#   BUILD=1 scripts/ncu_spec_profiles.sh              # Mamba-2, ~4 min with the build
#   FAMILY=gdn scripts/ncu_spec_profiles.sh           # GDN's window kernel (session 16 ran it)
#   FAMILY=batch1 scripts/ncu_spec_profiles.sh        # batch-1 decode kernels (sessions 24, 33)
#   FAMILY=decode256 scripts/ncu_spec_profiles.sh     # Mamba-2 decode at batch 256 (sessions 24, 33)
#   FAMILY=open256 scripts/ncu_spec_profiles.sh       # Mamba-2 spec rows of open targets (session 29 ran it)
#   FAMILY=flush256 scripts/ncu_spec_profiles.sh      # super T = 4 flush against its non-flush and the classic step (session 41)
#   FAMILY=so256 scripts/ncu_spec_profiles.sh         # the state-and-output route on tensor cores at batch 256 (session 51)
#   SMS=80 FAMILY=so256 scripts/ncu_spec_profiles.sh  # any family on 80 of the SMs (profile_step.py --sms): on an
#                                                     # H100, each SM with about an H200's share of the bandwidth
#
# Mamba-2 (nano; session 15 ran it, bench/results/h200-2026-11-30-s15-spec-stream/call2_ncu/): the
# spec kernel's CUDA-core stream at T = 4 non-flush (hist 8) and flush (hist 12), T = 2 non-flush.
# GDN (Qwen3.5-4B): the window kernel at T = 4 non-flush and flush (the v-head pairs with the L2
# lead), T = 2 non-flush.
# batch1 (issue 3's batch-1 cycle, 6.34 us against 4.6 with programmatic dependent launch): the
# Mamba-2 replay kernel at nano batch 1, output-only non-flush (hist 8 and 15) and flush (hist 15);
# the classic Mamba-2 step and the GDN decode (Qwen3.5-4B) at batch 1. The kernel's own duration
# against the benchmark's graph time per launch says how much of the 6.34 us is the kernel body
# and how much the gap between launches; the warp states say where the body waits.
# decode256 (issue 3's three open batch-256 gaps): the nano replay kernel at batch 256, non-flush
# hist 8 on the state-and-output route (1.45x output-only against 1.1x) and output-only (89.7 %
# of copy), the flush step at hist 15 (1.13-1.15x the classic step against 1.1x), and super's
# output-only non-flush step (84.8 % of copy against nano's 89.7 %). For the state-and-output
# case, docs/perf-notes.md (next steps item 5) estimates the update's shared-memory time at about
# half the stream's: compare with the profile's shared-memory pipe and the warp states.
# open256 (issue 5's open Mamba-2 rows at batch 256): super T = 4 non-flush (hist 8; 390 us target),
# nano T = 8 non-flush (hist 8) and flush (hist 12) on the tensor-core stream (540 us target).
# flush256 (issue 5's super T = 4 row: its flush step runs at 80 % of copy, its non-flush steps at
# 86 %, the classic step at 90 %): super T = 4 flush (hist 12) and non-flush (hist 8), and the
# classic step, which moves the flush step's bytes without the fold, at batch 256.
# so256 (issue 3's state-and-output target, 1.195x / 1.227x the output-only cycle on an H200 in
# session 50 against 1.1x): the nano replay kernel at batch 256, B = 16, on the tensor-core update
# (the launcher's choice there), non-flush at hist 8 and 15 and the flush step (hist 15), beside the
# output-only non-flush step at hist 8: is the tensor-core route bound by issue (as the CUDA-core
# form was in sessions 24 and 33) or by bytes in flight? Launch overrides in the environment reach
# the profiled process. Session 51 ran it (bench/results/h100-2026-12-05-s51/call4_ncu_so256/).
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
run_case() {  # name, kernel regex, op, geometry, batch, profile_step arguments...
  local name=$1 kernel=$2 op=$3 geometry=$4 batch=$5; shift 5
  echo "== $name: $op $geometry batch $batch $*"
  timeout 150 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SourceCounters --section ComputeWorkloadAnalysis --section InstructionStats -k regex:$kernel --launch-skip 3 --launch-count 1 \
    -o "$W/$name" python3 bench/profile_step.py --op $op --geometry $geometry \
    --batch $batch ${SMS:+--sms $SMS} "$@" > "$W/$name.run.log" 2>&1 || { echo "ncu failed ($name)"; tail -20 "$W/$name.run.log"; return; }
  ncu --import "$W/$name.ncu-rep" --page details > "$W/$name.details.txt" 2>&1
  ncu --import "$W/$name.ncu-rep" --page source --csv --print-source sass > "$W/$name.source.csv" 2>&1
  python3 bench/ncu_hotspots.py "$W/$name.source.csv" --window 80 --top 12 --show 2 > "$W/$name.hotspots.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per Thread|Achieved Occupancy|Block Limit|Executed Instructions  |Issue Slots Busy|Executed Ipc A" "$W/$name.details.txt" | head -16
  head -20 "$W/$name.hotspots.txt"
}
case ${FAMILY:-mamba2} in
  mamba2)
    k=mamba2_spec_verify_kernel op=mamba2_spec_verify g=nemotron3-nano-4b
    run_case t4_nonflush $k $op $g 256 --T 4 --hist 8
    run_case t4_flush $k $op $g 256 --T 4 --hist 12 --flush
    run_case t2_nonflush $k $op $g 256 --T 2 --hist 8 ;;
  gdn)
    k=gdn_window_kernel op=gdn_spec_verify g=qwen3.5-4b
    run_case t4_nonflush $k $op $g 256 --T 4 --hist 8
    run_case t4_flush $k $op $g 256 --T 4 --hist 12 --flush
    run_case t2_nonflush $k $op $g 256 --T 2 --hist 8 ;;
  batch1)
    g=nemotron3-nano-4b
    run_case m2_nonflush_h8 mamba2_replay_kernel mamba2_decode $g 1 --hist 8
    run_case m2_nonflush_h15 mamba2_replay_kernel mamba2_decode $g 1 --hist 15
    run_case m2_flush_h15 mamba2_replay_kernel mamba2_decode $g 1 --hist 15 --flush
    run_case m2_classic mamba2_state_update_kernel mamba2_state_update $g 1
    run_case gdn_nonflush_h8 gdn_rows_kernel gdn_decode qwen3.5-4b 1 --hist 8 ;;
  decode256)
    k=mamba2_replay_kernel op=mamba2_decode
    run_case so_nonflush_h8 $k $op nemotron3-nano-4b 256 --hist 8 --route state_and_output
    run_case oo_nonflush_h8 $k $op nemotron3-nano-4b 256 --hist 8
    run_case oo_flush_h15 $k $op nemotron3-nano-4b 256 --hist 15 --flush
    run_case super_oo_nonflush_h8 $k $op nemotron3-super-120b 256 --hist 8 ;;
  open256)
    k=mamba2_spec_verify_kernel op=mamba2_spec_verify
    run_case super_t4_nonflush $k $op nemotron3-super-120b 256 --T 4 --hist 8
    run_case nano_t8_nonflush $k $op nemotron3-nano-4b 256 --T 8 --hist 8
    run_case nano_t8_flush $k $op nemotron3-nano-4b 256 --T 8 --hist 12 --flush ;;
  flush256)
    k=mamba2_spec_verify_kernel op=mamba2_spec_verify g=nemotron3-super-120b
    run_case super_t4_flush $k $op $g 256 --T 4 --hist 12 --flush
    run_case super_t4_nonflush $k $op $g 256 --T 4 --hist 8
    run_case super_classic mamba2_state_update_kernel mamba2_state_update $g 256 ;;
  so256)
    k=mamba2_replay_kernel op=mamba2_decode g=nemotron3-nano-4b
    run_case so_nonflush_h8 $k $op $g 256 --hist 8 --route state_and_output
    run_case so_nonflush_h15 $k $op $g 256 --hist 15 --route state_and_output
    run_case so_flush_h15 $k $op $g 256 --hist 15 --flush --route state_and_output
    run_case oo_nonflush_h8 $k $op $g 256 --hist 8 ;;
  *) echo "FAMILY must be mamba2, gdn, batch1, decode256, open256, flush256 or so256"; exit 2 ;;
esac
rm -f "$W"/*.ncu-rep
tar czf "$OUT/ncu_${FAMILY:-mamba2}${SMS:+_sms$SMS}.tgz" -C "$W" .
echo "files in $OUT/ncu_${FAMILY:-mamba2}${SMS:+_sms$SMS}.tgz"
