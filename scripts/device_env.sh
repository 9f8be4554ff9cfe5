# Sourced by the one-off scripts of a GPU call (docs/prepared/*.sh), from the repository root: OUT
# (default ./out) created, the build and Python environment of a GPU run (sm_90a, 16 compile jobs,
# unbuffered output), the wheels in .whl/ (the machine has no network: nvidia-cutlass) installed
# into /tmp/site on PYTHONPATH, and t0 for the scripts' elapsed-time stamps. Which kernel families
# to build (REPLAYSSM_FAMILIES) is the calling script's choice.
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS

# ab_compare FOLDER BENCHMARK_ARGS...: scripts/ab_bench.sh (ab_base against the working tree) with
# those arguments into $OUT/FOLDER, its report in $OUT/FOLDER.txt; prints the elapsed time, the
# gates' line and the report's rows that match AB_ROWS (default: the Mamba-2 decode routes' rows).
# AB_KEEP_BASE=1 keeps the base build of an earlier comparison in the same call.
ab_compare() {
  local dir=$1; shift
  OUT=$OUT/$dir scripts/ab_bench.sh "$@" > "$OUT/$dir.txt" 2>&1
  echo "$dir rc=$? [$((SECONDS - t0)) s]"; grep -E 'FAILED|^gates' "$OUT/$dir.txt" | cut -c1-160
  grep -E "${AB_ROWS:-^m2_(so|oo)_(cycle|nonflush|flush) }" "$OUT/$dir.txt"
}

# m2_so_ab_sweep: the A/B of a Mamba-2 decode change against ab_base as sessions 63-64 ran it, into
# $OUT/{all,all2,sms96,sms80}. Nano and super, the state-and-output route. On an H100: all SMs at
# batch 1 / 256 (QUICK=1: 256) with B = 16 / 32, then 96 SMs (B = 16 / 32) and 80 SMs (B = 16) at
# batch 256, the H200's bandwidth per SM and below. On an H200: the whole device twice, both routes
# (the state-and-output target is their ratio).
m2_so_ab_sweep() {
  local batches=1,256
  [[ ${QUICK:-0} == 1 ]] && batches=256
  _m2_ab() {  # keep the base build, folder, benchmark args...
    AB_KEEP_BASE=$1 ab_compare "$2" --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
      --routes state_and_output "${@:3}"
  }
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    _m2_ab 0 all -B 16,32 --batches "$batches" --budget-s 60 --routes output_only,state_and_output
    _m2_ab 1 all2 -B 16 --batches 256 --budget-s 60 --routes output_only,state_and_output
  else
    _m2_ab 0 all -B 16,32 --batches "$batches" --budget-s 60
    _m2_ab 1 sms96 -B 16,32 --batches 256 --budget-s 60 --sms 96
    _m2_ab 1 sms80 -B 16 --batches 256 --budget-s 60 --sms 80
  fi
}

# m2_mma_racecheck: racecheck on the Mamba-2 tensor-core update's tests (the steep-decay case in both
# instances, the update forms of the nine-CTA one at nano and super) on the in-place build, into
# $OUT/racecheck.log, cut at 585 s of the call.
m2_mma_racecheck() {
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
    --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py \
    -k "test_decode_update_tensor_cores_steep_decay or (test_decode_update_forms and tensor_cores_nine and (nano or super))" \
    > "$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
}

# m2_so_merge_checks: after m2_so_ab_sweep, what a Mamba-2 state-and-output change needs before it
# merges, on the tree's in-place build that ab_bench made: the whole Mamba-2 GPU test file (every
# state-and-output form: flush rows' stored tiles, B = 32's two k-steps, split P at small batch),
# then, unless QUICK=1 and while time is left, racecheck on the tensor-core update's tests. Last, the
# sweep's folders into one archive ($OUT/runs.tgz): at most 8 files come back from a call.
m2_so_merge_checks() {
  timeout $((500 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider \
    > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
  [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 480 )) && m2_mma_racecheck
  # An H100 makes no all2, an H200 no sms96 / sms80.
  local d dirs=()
  for d in all all2 sms96 sms80; do [[ -d $OUT/$d ]] && dirs+=("$d"); done
  (( ${#dirs[@]} )) && (cd "$OUT" && tar -czf runs.tgz --exclude='*.png' "${dirs[@]}" && rm -rf "${dirs[@]}")
}

# m2_so_prepared_ab PATCH: a prepared Mamba-2 state-and-output patch's whole call, against ab_base
# (main, patch not applied): the patch applied to the tree, the card named, m2_so_ab_sweep, then
# m2_so_merge_checks.
m2_so_prepared_ab() {
  git apply --check "$1" 2>/dev/null && git apply "$1"
  git diff --quiet -- csrc && { echo "patch not applied: $1"; return 1; }
  export REPLAYSSM_FAMILIES=mamba2 BUILD_TIMEOUT=300 BENCH_TIMEOUT=150
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  m2_so_ab_sweep
  m2_so_merge_checks
}

# gdn_spec_prepared_ab PATCH: a prepared GDN spec-verify patch's whole call, against ab_base (main,
# patch not applied), as sessions 67-68 ran it: Qwen3.5-4B / 122B, B = 16, all accepted, with the
# flush / non-flush split. T = 4 at batch 256 on 96 SMs first (an H200's bandwidth per SM; on an
# H200 the whole device; SKIP96=1 leaves it out when an earlier call measured it), then unless
# QUICK=1 T = 4 (AB_TOKENS, e.g. 2,4) at batch 1 / 256 on all SMs; the GDN spec tests (AB_TESTS_K,
# pytest's -k, default "spec")
# on the tree's in-place build; unless QUICK=1 and while time is left, racecheck on the T = 4
# long-run spec case. The folders go into one archive ($OUT/runs.tgz).
gdn_spec_prepared_ab() {
  git apply --check "$1" 2>/dev/null && git apply "$1"
  git diff --quiet -- csrc && { echo "patch not applied: $1"; return 1; }
  export REPLAYSSM_FAMILIES=gdn BUILD_TIMEOUT=300 BENCH_TIMEOUT=150 AB_ROWS='^gdn_spec_(cycle|nonflush|flush) '
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  _gdn_ab() {  # keep the base build, folder, benchmark args...
    AB_KEEP_BASE=$1 ab_compare "$2" --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
      --spec-phases --budget-s 40 "${@:3}"
  }
  if [[ ${SKIP96:-0} != 1 ]]; then
    local sms=(--sms 96)
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && sms=()
    _gdn_ab 0 sms96 --spec-tokens 4 --batches 256 "${sms[@]}"
  fi
  [[ ${QUICK:-0} != 1 ]] && _gdn_ab 1 t4 --spec-tokens ${AB_TOKENS:-4} --batches 1,256
  timeout $((500 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider \
    -k "${AB_TESTS_K:-spec}" > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
  if [[ ${QUICK:-0} != 1 ]] && (( SECONDS < 480 )); then
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((585 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
      --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py \
      -k "test_spec_long_run and 4-fp32-bf16" > "$OUT/racecheck.log" 2>&1
    echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log"
  fi
  local d dirs=()
  for d in sms96 t4; do [[ -d $OUT/$d ]] && dirs+=("$d"); done
  (( ${#dirs[@]} )) && (cd "$OUT" && tar -czf runs.tgz --exclude='*.png' "${dirs[@]}" && rm -rf "${dirs[@]}")
}
