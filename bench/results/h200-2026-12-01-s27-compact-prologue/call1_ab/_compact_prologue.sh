#!/usr/bin/env bash
# Prepared in session 26 (delete before merging, keep with the results): the Mamba-2 spec
# verify with its cold prologue loops kept rolled (misaligned entry staging, ring deltas, weight
# products, the fold's table fill) and each window token's delta computed once, so that less code
# competes with the stream loop for the instruction caches. Session 26's ncu: main's T = 4 spec
# kernels lose 12.5-19 % of their warp samples to instruction fetch (stall_no_inst), and a change
# that only moved super's non-flush loop raised that to 28 % and the launch 461 -> 505 us.
# Local sm_90a compile: super T = 4 spec instance 5608 -> 4504 SASS instructions, every stream
# loop the same length; the decode kernels unchanged (their rows are the A/B's control).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_compact_prologue.sh ab     # ~8 min: both builds, decode + spec A/B, 2nd process, tests
#   bash scripts/_compact_prologue.sh ncu    # same machine, ~2 min: stall_no_inst of base and tree
# Merge if no row loses beyond the 1-3 % spread and the T = 4 spec rows or batch 1 gain.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
DEC=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
     --routes output_only,state_and_output)
SPEC=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
case ${1:?ab or ncu} in
ab)
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${DEC[@]}" > "$OUT/ab_dec.txt" 2>&1
  grep -E 'm2_|FAILED|rc=|built' "$OUT/ab_dec.txt" | head -90
  echo "[$((SECONDS - t0)) s] decode ab"
  mkdir -p "$OUT/dec" && mv "$OUT"/ab_base* "$OUT"/ab_tree* "$OUT/dec/"
  AB_KEEP_BASE=1 BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${SPEC[@]}" > "$OUT/ab_spec.txt" 2>&1
  grep -E 'spec|FAILED|rc=|built' "$OUT/ab_spec.txt" | grep -v snapshot | head -70
  echo "[$((SECONDS - t0)) s] spec ab"
  mkdir -p "$OUT/spec" && mv "$OUT"/ab_base* "$OUT"/ab_tree* "$OUT/spec/"
  timeout 60 python3 -m replayssm_ext.benchmark "${DEC[@]}" --batches 1,8,256 --out "$OUT/tree2_dec" > "$OUT/tree2_dec.log" 2>&1
  grep -E 'gates:|\] m2_(oo|so)_cycle .*batch=(1|8|256) ' "$OUT/tree2_dec.log" | head -12
  timeout 60 python3 -m replayssm_ext.benchmark "${SPEC[@]}" --batches 256 --spec-tokens 2,4 --out "$OUT/tree2_spec" > "$OUT/tree2_spec.log" 2>&1
  grep -E 'gates:|\] m2_spec_cycle ' "$OUT/tree2_spec.log" | head -8
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" dec spec tree2_dec tree2_dec.log tree2_spec tree2_spec.log && rm -rf "$OUT"/dec "$OUT"/spec "$OUT"/tree2*
  timeout 220 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -4 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  for tool in memcheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "spec_dtype_pairs or aligned_and_misaligned" > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  ;;
ncu)
  BASE=${AB_BASE_DIR:-/tmp/replayssm_ab_base}
  [[ -n $(ls replayssm_ext/*.so 2>/dev/null) && -n $(ls "$BASE"/replayssm_ext/*.so 2>/dev/null) ]] ||
    { echo "no builds in place: the machine was not warm"; exit 1; }
  W=$(mktemp -d)
  CASES=("spec_super_t4_h8|mamba2_spec_verify_kernel|--op mamba2_spec_verify --geometry nemotron3-super-120b --T 4 --hist 8"
         "spec_nano_t4_flush|mamba2_spec_verify_kernel|--op mamba2_spec_verify --geometry nemotron3-nano-4b --T 4 --hist 12 --flush"
         "dec_nano_b1_h8|mamba2_replay_kernel|--op mamba2_decode --geometry nemotron3-nano-4b --batch 1 --hist 8")
  for case_ in "${CASES[@]}"; do
    IFS='|' read -r name kernel args <<< "$case_"
    for label in base tree; do
      dir=$PWD; [[ $label == base ]] && dir=$BASE
      (cd "$dir" && PYTHONPATH=$dir:/tmp/site timeout 120 ncu --section SpeedOfLight --section WarpStateStats \
        --section SourceCounters -k regex:$kernel --launch-skip 3 --launch-count 1 -o "$W/${name}_$label" \
        python3 bench/profile_step.py $args > "$W/${name}_$label.run.log" 2>&1)
      ncu --import "$W/${name}_$label.ncu-rep" --page details > "$W/${name}_$label.details.txt" 2>&1
      ncu --import "$W/${name}_$label.ncu-rep" --page source --csv --print-source sass > "$W/${name}_$label.source.csv" 2>&1
      echo "== $name $label: $(grep -E '^ +Duration' "$W/${name}_$label.details.txt" | awk '{print $NF " us"}')" \
        "$(python3 bench/ncu_hotspots.py "$W/${name}_$label.source.csv" --window 80 --top 1 --show 0 2>&1 | sed -n 2p)"
      python3 - "$W/${name}_$label.source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, data = rows[1], rows[2:]
cols = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
tot = {hdr[i]: sum(float(r[i] or 0) for r in data) for i in cols}
s = sum(tot.values()) or 1
print("   samples", int(s), " ".join(f"{k[6:]}={v / s * 100:.1f}%" for k, v in tot.items() if v / s > 0.02))
PY
    done
  done
  rm -f "$W"/*.ncu-rep; tar czf "$OUT/ncu.tgz" -C "$W" .
  echo "[$((SECONDS - t0)) s] ncu"
  ;;
esac
