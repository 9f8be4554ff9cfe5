#!/usr/bin/env bash
# Session 12's check of main with the Mamba-2 tensor-core stream's per-tile L2 prefetch (delete
# after the run): build of every family, the full test suite, memcheck / racecheck on stream cases,
# the Mamba-2 spec benchmark (T = 4, 5, 8, both geometries, batch 1 / 64 / 256 / 512).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
t0=$SECONDS; timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo build failed; tail -30 "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"; rm -f "$OUT/build.log"
t0=$SECONDS; timeout 300 python3 -m pytest -q -p no:cacheprovider tests -n 15 > "$OUT/tests.log" 2>&1
echo "full suite rc=$? in $((SECONDS - t0)) s: $(tail -1 "$OUT/tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head
G=tests/test_mamba2_cuda.py
for tool in memcheck racecheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 97 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider -p no:xdist "$G::test_spec_stream_forms[pairs-mma-geo0-16-6-3]" \
    "$G::test_spec_stream_forms[launcher-mma-geo1-16-8-3]" "$G::test_spec_stream_forms[launcher-mma-geo5-16-8-3]" > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$?: $(tail -1 "$OUT/san_$tool.log"); $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)"
done
timeout 100 python3 -m replayssm_ext.benchmark --sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b \
  --batches 1,64,256,512 -B 16 --spec-tokens 4,5,8 --accept all --budget-s 60 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E "^m2_spec" "$OUT/bench.log" | awk '{print "  ", $1, $2, $3, $5, $9, $10, $11, $12}'
rm -f "$OUT"/bench/*.png
