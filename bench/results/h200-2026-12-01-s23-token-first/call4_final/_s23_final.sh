#!/usr/bin/env bash
# Session 23, last device call: the merged form (inputs first in the entries-first instances only)
# built, benchmarked (compared with the same machine kind's main numbers of the variants call),
# and the Mamba-2 GPU tests plus the launch-mode tests run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 170 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
timeout 40 python3 -m replayssm_ext.benchmark --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 \
  --batches 1,8,256 --routes output_only,state_and_output --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc=$? $(grep -E 'gates:' "$OUT/bench.log")"
grep -E '\] m2_(oo|so)_(cycle|nonflush) ' "$OUT/bench.log" | awk '{print $3, $4, $5, $7}' | tr '\n' ';'; echo
echo "[$((SECONDS - t0)) s] bench"
timeout 150 python3 -m pytest -q -n 16 -p no:cacheprovider tests/test_mamba2_cuda.py tests/test_dependent_launch.py \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? $(tail -1 "$OUT/tests.log")"
grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -20
echo "[$((SECONDS - t0)) s] tests"
tar czf "$OUT/s23_final.tgz" -C "$OUT" build.log bench bench.log tests.log && rm -rf "$OUT"/bench "$OUT"/*.log
