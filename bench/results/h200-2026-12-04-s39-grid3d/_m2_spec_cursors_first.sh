#!/usr/bin/env bash
# Session 39 (delete before merging, keep with the results): the Mamba-2 spec verify kernel with the
# slot's cursors and token range requested and checked before its first state loads (ptxas then
# puts those loads after the cursor exits, before the entries' staging), against main, where the
# state loads went first and the cursor loads ~130 SASS instructions later.
#   scripts/ab_bench.sh --prepare HEAD      # here (carry .whl, ab_base)
#   bash scripts/_m2_spec_cursors_first.sh ab        # Mamba-2-only builds, the spec section A/B in two rounds (batch
#                                           # 1 / 8 / 64 / 256 / 512, nano and super, B = 16, T = 2 / 4 / 8),
#                                           # then the tree's Mamba-2 tests
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_spec_cursors_first.sh ab|tests"}
t0=$SECONDS
geos=nemotron3-nano-4b,nemotron3-super-120b
case $stage in
ab)
  # Two rounds: the second keeps both builds (AB_KEEP_BASE=1; the tree's objects are up to date), so
  # each build is timed in two processes.
  for round in 1 2; do
    mkdir -p "$OUT/r$round"
    OUT=$OUT/r$round AB_KEEP_BASE=$((round - 1)) BUILD_TIMEOUT=240 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh \
      --sections spec --geometries $geos -B 16 --batches 1,8,64,256,512 --spec-tokens 2,4,8 --accept all --budget-s 110 > "$OUT/ab_r$round.txt" 2>&1
    grep -E 'rc=|built|FAILED|keeping' "$OUT/ab_r$round.txt" | head
    grep '^gates:' "$OUT/ab_r$round.txt"
    echo "[$((SECONDS - t0)) s] round $round"
  done
  tar czf "$OUT/ab.tgz" -C "$OUT" r1 r2 && rm -rf "$OUT"/r1 "$OUT"/r2
  if [[ ${WITH_TESTS:-1} == 1 ]]; then
    timeout $((590 - SECONDS + t0)) python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 \
      -p no:cacheprovider > "$OUT/tests.log" 2>&1
    echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 6 "$OUT/tests.log"
  fi
  ;;
*) echo "unknown stage $stage (ab)" >&2; exit 2 ;;
esac
