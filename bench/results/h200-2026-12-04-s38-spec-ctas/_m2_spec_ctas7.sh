#!/usr/bin/env bash
# Session 38 (delete before merging, keep with the results): the Mamba-2 spec verify's 4-token
# instances bounded at 7 CTAs per SM (spec_min_ctas, 72 registers) instead of 6 (80). sm_90a,
# mamba2_spec_fp32_t4.cu: the aligned-view pair and one-head instances (bf16, fp32 state, N = 128)
# keep 0 bytes of spill at 72 registers; at 64 (8 CTAs) they spill 12-56 bytes. Shared memory of a
# pair CTA at B = 16 (~28 KB nano, ~24 KB super) fits 7.
#   scripts/ab_bench.sh --prepare HEAD      # here (carry .whl, ab_base)
#   bash scripts/_m2_spec_ctas7.sh ab       # ~6 min: Mamba-2-only builds, spec T = 4 rows A/B, then the
#                                           # tree's CUDA-core L2 lead at 0 / 1 / 3 (2 is the rule's)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_spec_ctas7.sh ab"}
t0=$SECONDS
geos=nemotron3-nano-4b,nemotron3-super-120b
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh --sections spec --geometries $geos -B 16 \
    --accept all,mean2.5 --batches 1,8,64,256,512 --spec-tokens 4 --budget-s 100 > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$6,$(NF-2),$(NF-1),$NF}'
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  for lead in 0 1 3; do
    REPLAYSSM_M2_SPEC_L2=$lead timeout 60 python3 -m replayssm_ext.benchmark --sections spec --geometries $geos \
      -B 16 --accept all --batches 256,512 --spec-tokens 4 --budget-s 30 --out "$OUT/lead$lead" > "$OUT/lead$lead.log" 2>&1
    echo "lead $lead rc=$?"; grep -E 'm2_spec_cycle' "$OUT/lead$lead/table.txt" 2>/dev/null | head -8
  done
  echo "[$((SECONDS - t0)) s] leads"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* lead* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log "$OUT"/lead*
  ;;
*) echo "unknown stage $stage (ab)" >&2; exit 2 ;;
esac
