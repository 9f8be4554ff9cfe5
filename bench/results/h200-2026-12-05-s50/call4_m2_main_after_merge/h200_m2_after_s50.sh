cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
OUT=$OUT STAGES=build BUILD_TIMEOUT=200 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
echo "build [$((SECONDS - t0)) s]"; grep -E "^== build" "$OUT/build_run.log"
timeout 150 python3 -m replayssm_ext.benchmark --sections m2 --routes output_only,state_and_output \
  --batches 1,256 -B 16 --budget-s 60 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc=$? [$((SECONDS - t0)) s]"; grep -E '^(m2_|d2d|commit)' "$OUT/bench.log" | head -40
