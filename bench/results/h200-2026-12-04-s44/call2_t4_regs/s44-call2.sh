#!/usr/bin/env bash
# Session 44, call 2: the GDN register stream (window_stream.cuh) at the 4-token tile, built for the
# measurement and off by default. One build; the spec verify timed per process with
# REPLAYSSM_GDN_SPEC_REGS=0 (the stage buffers, main's choice), =1 (the launcher's 5-CTA rule on
# large grids), =1 with REPLAYSSM_GDN_SPEC_REG_CTAS=4, and =1 with one head per CTA; Qwen3.5-4B,
# B = 16, all accepted, T = 4, batch 64 / 256 / 512, --spec-phases. Then the T = 4 GDN tests with the
# register stream forced (carry .whl).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
OUT=$OUT STAGES=build BUILD_TIMEOUT=250 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
echo "build [$((SECONDS - t0)) s]"; grep -E "^== build" "$OUT/build_run.log"
args="--sections spec --geometries qwen3.5-4b -B 16 --spec-tokens 4 --accept all --spec-phases --batches 64,256,512 --budget-s 40"
for round in 1 2; do
for v in "stage REPLAYSSM_GDN_SPEC_REGS=0" "regs REPLAYSSM_GDN_SPEC_REGS=1" "regs4 REPLAYSSM_GDN_SPEC_REGS=1 REPLAYSSM_GDN_SPEC_REG_CTAS=4" "regs1h REPLAYSSM_GDN_SPEC_REGS=1 REPLAYSSM_GDN_SPEC_HEADS=1"; do
  set -- $v; name=$1; shift
  env "$@" timeout 100 python3 -m replayssm_ext.benchmark $args --out "$OUT/b_${name}_$round" > "$OUT/b_${name}_$round.log" 2>&1
  echo "$name r$round rc=$? [$((SECONDS - t0)) s]"
  grep -E "^gdn_spec_(cycle|flush|nonflush) " "$OUT/b_${name}_$round/table.txt" 2>/dev/null | awk '{print "  ", $0}' | cut -c1-140
done
done
tar czf "$OUT/bench.tgz" -C "$OUT" $(cd "$OUT" && ls -d b_*) && rm -rf "$OUT"/b_*
REPLAYSSM_GDN_SPEC_REGS=1 timeout $((590 - SECONDS + t0)) python3 -m pytest tests/test_gdn_cuda.py -q -rs -n 14 -p no:cacheprovider \
  -k "test_spec_long_run and 4-fp32-bf16" > "$OUT/tests_regs.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests_regs.log" | head; tail -n 1 "$OUT/tests_regs.log"
