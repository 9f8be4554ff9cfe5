#!/usr/bin/env bash
# Prepared in session 18 (delete before merging): REPLAYSSM_GDN_SPEC_TILES, the tiles per v-head of
# gdn_spec_verify forced for measurements. One GPU call (~7 min; carry .whl):
#   bash scripts/_gdn_tiles.sh
# GDN-only build; the tiling tests and the override errors; the same benchmark at small batch with
# the launcher's tiling and with 1 / 2 / 4 / 8 tiles per v-head forced (Qwen3.5-4B and 122B, T = 2 /
# 4 / 8, batch 1-32); memcheck on the forced tilings. What to look for: at batch 1-8 the launcher
# splits each head into 16- to 32-row tiles (pick_tiles: about two CTAs per SM), so every CTA
# repeats the window's prologue for few rows, and below 64 rows the 8-token tile cannot take the
# register stream (session 18: batch 8 at T = 8 ran 31.5 us on 32-row stage tiles, 22.9 on 64-row
# register tiles). If fewer, longer tiles win, the rule in pick_tiles' place is the result.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 200 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
timeout 150 python3 -m pytest -q -n 16 tests/test_gdn_cuda.py -k "tiles or regs_override or stream_forms or heads_override" > "$OUT/tests.log" 2>&1
tail -2 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
for tiles in "" 1 2 4 8; do
  REPLAYSSM_GDN_SPEC_TILES=$tiles timeout 60 python3 -m replayssm_ext.benchmark --sections spec \
    --geometries qwen3.5-4b,qwen3.5-122b --batches 1,2,4,8,16,32 -B 16 --spec-tokens 2,4,8 --accept all \
    --out "$OUT/tiles${tiles:-_launcher}" > "$OUT/tiles${tiles:-_launcher}.log" 2>&1
  echo "tiles=${tiles:-launcher}: $(grep -E '\] gdn_spec_cycle' "$OUT/tiles${tiles:-_launcher}.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
done
echo "[$((SECONDS - t0)) s] sweep"
REPLAYSSM_GDN_SPEC_TILES= timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q -x \
  tests/test_gdn_cuda.py -k "test_spec_tiles" > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/san_memcheck.log" | tr '\n' ' ')"
# At most 8 files come back from a call: the sweep's logs and results go as one archive.
tar czf "$OUT/sweep.tgz" -C "$OUT" $(cd "$OUT" && ls -d tiles*) && rm -rf "$OUT"/tiles*
echo "[$((SECONDS - t0)) s] done"
