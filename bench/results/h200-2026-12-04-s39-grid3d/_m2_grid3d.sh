#!/usr/bin/env bash
# Session 39 (delete before merging, keep with the results): the Mamba-2 replay and classic kernels on a
# (P chunks, H, batch) grid instead of one flat extent, so no run-time integer divisions stand between
# a CTA's start and its slot read (sm_90a SASS of the nano batch-1 instance: the first global load
# moved from instruction ~250 to ~124).
#   scripts/ab_bench.sh --prepare HEAD      # here (carry .whl, ab_base)
#   bash scripts/_m2_grid3d.sh ab           # Mamba-2-only builds, the m2 section A/B (batch 1 / 8 / 64 / 256,
#                                           # nano and super, B = 16, both routes), then the tree's Mamba-2 tests
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_grid3d.sh ab|tests"}
t0=$SECONDS
geos=nemotron3-nano-4b,nemotron3-super-120b
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh --sections m2 --geometries $geos -B 16 \
    --batches 1,8,64,256 --budget-s 110 > "$OUT/ab.txt" 2>&1
  grep -E 'rc=|built|FAILED' "$OUT/ab.txt" | head
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log
  if [[ ${WITH_TESTS:-1} == 1 ]]; then
    timeout $((590 - SECONDS + t0)) python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 \
      -p no:cacheprovider > "$OUT/tests.log" 2>&1
    echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 6 "$OUT/tests.log"
  fi
  ;;
*) echo "unknown stage $stage (ab)" >&2; exit 2 ;;
esac
