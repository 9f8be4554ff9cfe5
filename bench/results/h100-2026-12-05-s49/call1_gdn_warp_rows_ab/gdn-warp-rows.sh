#!/usr/bin/env bash
# docs/prepared/gdn-warp-rows.patch measured and checked: the GDN window kernel's CTAs at the 4-token
# tile with an fp32 checkpoint, bf16 activations and K = 128 stream whole rows per warp
# (WindowRowsMma: no CTA barrier, partial sums or finish pass per chunk; folding CTAs fold each unit
# in the warp's own slot). The A/B includes the gdn section: the patch moves fold_chunk_mma's body
# into fold_tile_mma, which leaves the rows kernel's SASS the same length but rescheduled.
# Prepare where the git history is: scripts/ab_bench.sh --prepare HEAD; git apply
# docs/prepared/gdn-warp-rows.patch; cp docs/prepared/gdn-warp-rows.sh scripts/. Then on the GPU
# machine, two calls (carry .whl, ab_base):
#   MODE=ab bash scripts/gdn-warp-rows.sh      # A/B against main, then racecheck on the T = 4 long runs
#   MODE=tests bash scripts/gdn-warp-rows.sh   # every GDN GPU test, then memcheck on the T = 4 long runs
# Written in session 44 (no device left to run it); its index arithmetic is emulated lane by lane
# in bench/results/h200-2026-12-04-s44/prepared/emu_warp_rows.py.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
long_runs="test_spec_long_run and 4-fp32-bf16"
if [[ ${MODE:-ab} == ab ]]; then
  args="--sections gdn,spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --spec-tokens 2,4,8 --accept all,mean2.5 --spec-phases --batches 1,8,64,256,512 --budget-s 100"
  mkdir -p "$OUT/ab"
  OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=140 bash scripts/ab_bench.sh $args > "$OUT/ab.txt" 2>&1
  grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates:' "$OUT/ab.txt" | cut -c1-160
  grep -E '^gdn_spec_(cycle|flush|nonflush) ' "$OUT/ab.txt" | grep -E ' 4 (all|mean2.5) ' | head -60
  echo "[$((SECONDS - t0)) s] ab done"
  tar czf "$OUT/ab.tgz" -C "$OUT" ab && rm -rf "$OUT/ab"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS + t0)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py -k "$long_runs" > "$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
else
  OUT=$OUT STAGES=build BUILD_TIMEOUT=250 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
  echo "build [$((SECONDS - t0)) s]"; grep -E "^== build" "$OUT/build_run.log"
  timeout 250 python3 -m pytest tests/test_gdn_cuda.py tests/test_gdn_ops.py -q -rs -n 14 -p no:cacheprovider > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; grep -E "passed|failed" "$OUT/tests.log" | tail -n 2
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS + t0)) compute-sanitizer --tool memcheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py -k "$long_runs" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log"
fi
