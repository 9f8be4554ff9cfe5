#!/usr/bin/env bash
# Session 25 (delete before merging, keep with the results): session 24's two prepared patches
# measured together, since they change different kernels (the decode's replay kernel and the
# spec verify) and one build of both saves a build per call.
#   m2-aligned-entries-first.patch: the replay kernel's entries-first instances built a second
#     time for 16-byte aligned state views (state-and-output route, flush rows, batch 1 / 8).
#   m2-spec-dot-pipeline.patch: the spec verify's non-flush CTAs on the aligned-view stream
#     (fp32 checkpoint, T = 3..4) with two iterations of state loads in flight per warp.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the call (carry .whl, ab_base)
#   bash scripts/_s25_both.sh ab      # build both at once, decode + spec A/B, second tree process, tests
#   bash scripts/_s25_both.sh san     # same machine: memcheck / racecheck on both changes' tests
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
DEC=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
     --routes output_only,state_and_output)
SPEC=(--sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,64,256,512
      --spec-tokens 2,4,8 --accept all)
case ${1:?ab or san} in
ab)
  BUILD_TIMEOUT=300 BENCH_TIMEOUT=90 bash scripts/ab_bench.sh "${DEC[@]}" > "$OUT/ab_dec.txt" 2>&1
  grep -E 'm2_|FAILED|rc=|built' "$OUT/ab_dec.txt" | head -90
  echo "[$((SECONDS - t0)) s] decode ab"
  mkdir -p "$OUT/dec" && mv "$OUT"/ab_base* "$OUT"/ab_tree* "$OUT/dec/"
  # Both builds stay in place (AB_KEEP_BASE): the second pass only re-links.
  AB_KEEP_BASE=1 BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh "${SPEC[@]}" > "$OUT/ab_spec.txt" 2>&1
  grep -E 'spec|FAILED|rc=|built' "$OUT/ab_spec.txt" | grep -v snapshot | head -70
  echo "[$((SECONDS - t0)) s] spec ab"
  mkdir -p "$OUT/spec" && mv "$OUT"/ab_base* "$OUT"/ab_tree* "$OUT/spec/"
  timeout 60 python3 -m replayssm_ext.benchmark "${DEC[@]}" --batches 1,8,256 --out "$OUT/tree2_dec" > "$OUT/tree2_dec.log" 2>&1
  grep -E 'gates:|\] m2_(oo|so)_cycle .*batch=(1|8|256) ' "$OUT/tree2_dec.log" | head -12
  timeout 60 python3 -m replayssm_ext.benchmark "${SPEC[@]}" --batches 256 --spec-tokens 4 --out "$OUT/tree2_spec" > "$OUT/tree2_spec.log" 2>&1
  grep -E 'gates:|spec.*T=4' "$OUT/tree2_spec.log" | grep -v snapshot | head -8
  echo "[$((SECONDS - t0)) s] tree2"
  tar czf "$OUT/ab.tgz" -C "$OUT" dec spec tree2_dec tree2_dec.log tree2_spec tree2_spec.log && rm -rf "$OUT"/dec "$OUT"/spec "$OUT"/tree2*
  timeout 220 python3 -m pytest -q -rs -n 16 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -4 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
san)
  [[ -n $(ls replayssm_ext/*.so 2>/dev/null) ]] || { echo "no build in place: the machine was not warm"; ls replayssm_ext; exit 1; }
  for sel in "aligned_and_misaligned or (long_run_mixed and state_and_output)" "spec_vec_stream_forms"; do
    for tool in memcheck racecheck; do
      log="$OUT/san_${tool}_${sel%% *}.log"
      timeout 80 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_mamba2_cuda.py -k "$sel" > "$log" 2>&1
      echo "$tool [$sel] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$log" | tr '\n' ' ')"
    done
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" $(cd "$OUT" && ls san_*.log)
  ;;
esac
