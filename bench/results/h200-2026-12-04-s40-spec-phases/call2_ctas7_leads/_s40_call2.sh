#!/usr/bin/env bash
# Session 40, call 2 (delete before merging, keep with the results): the spec verify at T = 4 with
# its cycle split into the non-flush steps and the flush step (--spec-phases), main (base) against
# the 4-token instances at 7 CTAs per SM (tree: session 38's m2-spec-t4-ctas7.patch), and in each
# build the launcher's run-time choices forced by their overrides: the CUDA-core stream's L2 lead
# (REPLAYSSM_M2_SPEC_L2 = 0 / 1 / 3 / 4; the rule takes 2 at batch 256 / 512) and one head per CTA
# (REPLAYSSM_M2_SPEC_HEADS=1, base only; the rule takes pairs). Nano and super, B = 16, all accepted.
# Then, on the tree's build, the GDN spec verify's cycle split the same way (Qwen3.5-4B and 122B,
# T = 2 / 4 / 8, batch 256 / 512, the launcher's rules; its code is main's).
#   scripts/ab_bench.sh --prepare HEAD; git apply <patch>     # here (carry .whl, ab_base)
#   bash scripts/_s40_call2.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
geos=nemotron3-nano-4b,nemotron3-super-120b
spec_args=(--sections spec --geometries $geos -B 16 --spec-tokens 4 --accept all --spec-phases)
# Round 1: both builds, batch 64 / 256 / 512.
mkdir -p "$OUT/r1"
OUT=$OUT/r1 BUILD_TIMEOUT=330 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh "${spec_args[@]}" --batches 64,256,512 \
  --budget-s 80 > "$OUT/ab_r1.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab_r1.txt"; grep '^gates:' "$OUT/ab_r1.txt"
echo "[$((SECONDS - t0)) s] round 1"
BASE_DIR=/tmp/replayssm_ab_base
run() {  # label, folder, config
  local label=$1 dir=$2 cfg=$3 envs=()
  case $cfg in
    rule) ;;
    L2=*) envs=(REPLAYSSM_M2_SPEC_L2=${cfg#L2=}) ;;
    HEADS=*) envs=(REPLAYSSM_M2_SPEC_HEADS=${cfg#HEADS=}) ;;
  esac
  (cd "$dir" && env "${envs[@]}" timeout 60 python3 -m replayssm_ext.benchmark "${spec_args[@]}" --batches 256,512 \
    --budget-s 50 --out "$OUT/runs/${label}_$cfg") > "$OUT/runs/${label}_$cfg.log" 2>&1
  echo "$label $cfg rc=$? [$((SECONDS - t0)) s]"
}
for cfg in L2=0 L2=1 L2=3 L2=4 HEADS=1; do
  run base "$BASE_DIR" $cfg
  [[ $cfg == HEADS=1 ]] || run tree "$PWD" $cfg
  (( SECONDS - t0 > 400 )) && { echo "sweep stopped: time"; break; }
done
timeout 90 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 \
  --batches 256,512 --spec-tokens 2,4,8 --accept all --spec-phases --budget-s 70 \
  --out "$OUT/runs/gdn_phases" > "$OUT/runs/gdn_phases.log" 2>&1
echo "gdn phases rc=$? [$((SECONDS - t0)) s]"
# Round 2 (both builds kept: relinks only), if time is left.
if (( SECONDS - t0 < 420 )); then
  mkdir -p "$OUT/r2"
  OUT=$OUT/r2 AB_KEEP_BASE=1 BUILD_TIMEOUT=60 BENCH_TIMEOUT=60 bash scripts/ab_bench.sh "${spec_args[@]}" --batches 256,512 \
    --budget-s 50 > "$OUT/ab_r2.txt" 2>&1
  grep -E 'rc=|built|FAILED' "$OUT/ab_r2.txt"; grep '^gates:' "$OUT/ab_r2.txt"
  echo "[$((SECONDS - t0)) s] round 2"
fi
# The tree's Mamba-2 spec tests with the time left (its change is the 4-token spec instances' bound).
left=$((585 - SECONDS + t0))
if (( left > 60 )); then
  timeout $left python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 -k spec \
    -p no:cacheprovider > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 4 "$OUT/tests.log"
fi
# One line per (run, row): us per step.
for f in "$OUT"/runs/*.log "$OUT"/r*/ab_base.log "$OUT"/r*/ab_tree.log; do
  [[ -f $f ]] || continue
  name=${f#$OUT/}; name=${name%.log}; name=${name//\//:}
  sed -E 's/^\[ *[0-9.]+s\] //' "$f" | grep -E '^(m2|gdn)_spec_(cycle|nonflush|flush) ' | awk -v n="$name" '{print n, $1, $2, $3, $5, $7}'
done | sort -k3,3 -k4,4 -k2,2 -k1,1 > "$OUT/summary.txt"
cat "$OUT/summary.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs r1 $( [[ -d $OUT/r2 ]] && echo r2 ) && rm -rf "$OUT/runs" "$OUT/r1" "$OUT/r2"
