#!/usr/bin/env bash
# One GPU run of replayssm: environment, build, tests, sanitizers, benchmark; logs under $OUT and a
# short table last. Run from the repository root on the GPU machine (one H200, no network).
#
#   STAGES="build,test,bench" scripts/gpu_check.sh [pytest args...]
#
# Environment (all optional):
#   OUT             output folder (default ./out); at most 8 files come back from a remote run, so
#                   the stages write only: build.log, test.log, junit.xml, sanitize.log, bench.log
#                   (the runner stage appends to it too), and what the benchmark writes into
#                   --out (bench.json, table.txt, speedup.png)
#   STAGES          comma list of build,test,sanitize,bench,runner (default "build,test,bench");
#                   the environment is always printed
#   PYTEST_ARGS     pytest arguments of the test stage (default "tests -x"); positional arguments
#                   of the script replace them
#   SANITIZE_ARGS   pytest arguments for the sanitizer runs (default "tests -x -k cuda")
#   SANITIZE_TOOLS  compute-sanitizer tools (default "memcheck racecheck")
#   BENCH_ARGS      extra arguments for python3 -m replayssm_ext.benchmark
#   RUNNER_ARGS     arguments of the C++ runner stage (default "commit --batch 512 --iters 2000")
#   TORCH_CUDA_ARCH_LIST  default "9.0a";  MAX_JOBS  default 16
#   BUILD_TIMEOUT TEST_TIMEOUT SANITIZE_TIMEOUT BENCH_TIMEOUT  seconds per stage
#                   (defaults 300, 300, 400, 330)
# Wheels in .whl/ (nvidia-cutlass, for one: the machine has no network) are installed into
# /tmp/site first and put on PYTHONPATH.
# A remote call has 600 s in all: the benchmark's own --budget-s (default 240) plus build and tests
# must fit, e.g. BENCH_ARGS="--quick" or "--budget-s 150" after a cold build.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
STAGES=${STAGES:-build,test,bench}
PYTEST_ARGS=${PYTEST_ARGS:-tests -x}
if [[ $# -gt 0 ]]; then PYTEST_ARGS="$*"; fi
SANITIZE_ARGS=${SANITIZE_ARGS:-tests -x -k cuda}
SANITIZE_TOOLS=${SANITIZE_TOOLS:-memcheck racecheck}
BENCH_ARGS=${BENCH_ARGS:-}
RUNNER_ARGS=${RUNNER_ARGS:-commit --batch 512 --iters 2000}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
export MAX_JOBS=${MAX_JOBS:-16}
export PYTHONUNBUFFERED=1

run_start=$SECONDS
summary=()  # "stage|status|seconds|detail"
any_failed=0

want() { [[ ",$STAGES," == *",$1,"* ]]; }
record() {  # stage status seconds detail
  summary+=("$1|$2|$3|$4")
  [[ $2 == ok || $2 == skipped ]] || any_failed=1
  echo "== $1: $2 (${3} s) $4"
}
# Splits a string of arguments the way the shell would (quotes respected) into the array ARGS.
split_args() { eval "ARGS=($1)"; }
tail_on_failure() { echo "---- last lines of $1"; tail -n "${2:-40}" "$1"; echo "----"; }

# ---- environment -----------------------------------------------------------------------------
echo "== environment ($(date -u +%FT%TZ)), OUT=$OUT, STAGES=$STAGES"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
else
  echo "nvidia-smi not found"
fi
python3 -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| device', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"
nvcc --version | tail -n 1
command -v compute-sanitizer >/dev/null && compute-sanitizer --version | tail -n 1

shopt -s nullglob
wheels=(.whl/*.whl)
shopt -u nullglob
if [[ ${#wheels[@]} -gt 0 ]]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "${wheels[@]}" &&
    echo "installed into /tmp/site: ${wheels[*]}" || echo "WARNING: installing ${wheels[*]} failed"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# ---- build -----------------------------------------------------------------------------------
if want build; then
  t0=$SECONDS
  {
    echo "TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS"
    timeout "${BUILD_TIMEOUT:-300}" python3 setup.py build_ext --inplace
  } >"$OUT/build.log" 2>&1
  rc=$?
  # Per-file compile times of the latest build (ninja log: start ms, end ms, mtime, output).
  python3 - >>"$OUT/build.log" 2>&1 <<'PY'
import glob
for log in glob.glob("build/**/.ninja_log", recursive=True):
    latest = {}
    for line in open(log):
        f = line.rstrip("\n").split("\t")
        if not line.startswith("#") and len(f) >= 4:
            latest[f[3]] = (int(f[1]) - int(f[0])) / 1000
    print(f"compile times ({log}):")
    for out, s in sorted(latest.items(), key=lambda kv: -kv[1]):
        print(f"  {s:7.1f} s  {out}")
PY
  if [[ $rc -eq 0 ]]; then
    detail=$(python3 -c "import replayssm_ext as r; print('HAS_CUDA_KERNELS=%s' % r.HAS_CUDA_KERNELS)" 2>&1 | tail -n 1)
    [[ $detail == "HAS_CUDA_KERNELS=True" ]] || rc=1
    record build "$([[ $rc -eq 0 ]] && echo ok || echo FAILED)" $((SECONDS - t0)) "$detail"
  else
    record build "FAILED(rc=$rc)" $((SECONDS - t0)) "see build.log"
  fi
  [[ $rc -eq 0 ]] || tail_on_failure "$OUT/build.log"
  if [[ $rc -ne 0 ]]; then
    # Nothing after a failed build would test the current sources.
    for s in test sanitize bench runner; do want $s && record $s skipped 0 "build failed"; done
    STAGES=build
  fi
fi

# junit.xml -> "N passed, F failed, E errors, S skipped"
junit_counts() {
  python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception as e:
    print(f"no junit report ({type(e).__name__})"); sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
c = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
print(f"{c['tests'] - c['failures'] - c['errors'] - c['skipped']} passed, {c['failures']} failed, "
      f"{c['errors']} errors, {c['skipped']} skipped")
PY
}

# ---- tests -----------------------------------------------------------------------------------
if want test; then
  t0=$SECONDS
  split_args "$PYTEST_ARGS"
  timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider "${ARGS[@]}" \
    --junitxml="$OUT/junit.xml" >"$OUT/test.log" 2>&1
  rc=$?
  record test "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED(rc=$rc)")" $((SECONDS - t0)) "$(junit_counts "$OUT/junit.xml")"
  [[ $rc -eq 0 ]] || tail_on_failure "$OUT/test.log" 60
fi

# ---- compute-sanitizer -----------------------------------------------------------------------
if want sanitize; then
  : >"$OUT/sanitize.log"
  split_args "$SANITIZE_ARGS"
  for tool in $SANITIZE_TOOLS; do
    t0=$SECONDS
    echo "==== compute-sanitizer --tool $tool: pytest ${ARGS[*]}" >>"$OUT/sanitize.log"
    # No caching allocator under the sanitizer, so out-of-bounds accesses land outside allocations.
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_TIMEOUT:-400}" \
      compute-sanitizer --tool "$tool" --error-exitcode 97 --print-limit 20 \
      python3 -m pytest -q -p no:cacheprovider "${ARGS[@]}" >>"$OUT/sanitize.log" 2>&1
    rc=$?
    detail=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize.log" | tail -n 1)
    record "$tool" "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED(rc=$rc)")" $((SECONDS - t0)) "${detail:-no summary line}"
    [[ $rc -eq 0 ]] || sanitize_failed=1
  done
  [[ ${sanitize_failed:-0} -eq 0 ]] || tail_on_failure "$OUT/sanitize.log" 40
fi

# ---- benchmark -------------------------------------------------------------------------------
if want bench; then
  t0=$SECONDS
  split_args "$BENCH_ARGS"
  timeout "${BENCH_TIMEOUT:-330}" python3 -m replayssm_ext.benchmark --out "$OUT" "${ARGS[@]}" >"$OUT/bench.log" 2>&1
  rc=$?
  record bench "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED(rc=$rc)")" $((SECONDS - t0)) "bench.log, bench.json, table.txt, speedup.png"
  echo "---- benchmark (last lines of bench.log)"
  tail -n 45 "$OUT/bench.log"
fi

# ---- C++ runner (no torch): one kernel in a loop, as ncu / nsys would run it -------------------
if want runner; then
  t0=$SECONDS
  arch=${TORCH_CUDA_ARCH_LIST%%;*}   # first entry, e.g. 9.0a -> sm_90a
  sm="sm_${arch//./}"
  split_args "$RUNNER_ARGS"
  cutlass_inc=$(python3 -c "import importlib.util, os; s = importlib.util.find_spec('cutlass_library'); print(os.path.join(os.path.dirname(s.origin), 'source', 'include') if s and s.origin else '')" 2>/dev/null)
  {
    # CMake may be absent on the GPU machine: the same sources and flags as CMakeLists.txt, by hand,
    # one nvcc per file in parallel, then one link.
    rm -rf /tmp/replayssm_runner_obj && mkdir -p /tmp/replayssm_runner_obj
    export RUNNER_NVCC_FLAGS="-std=c++20 -O3 --expt-relaxed-constexpr -lineinfo -arch=$sm -Icsrc/include${cutlass_inc:+ -I$cutlass_inc}"
    printf '%s\n' csrc/runner/runner.cu csrc/kernels/*.cu |
      xargs -P "$MAX_JOBS" -I{} sh -c 'nvcc $RUNNER_NVCC_FLAGS -c "$1" -o "/tmp/replayssm_runner_obj/$(basename "$1" .cu).o"' _ {} &&
      nvcc -arch="$sm" /tmp/replayssm_runner_obj/*.o -o /tmp/replayssm_runner &&
      /tmp/replayssm_runner "${ARGS[@]}"
  } >/tmp/replayssm_runner.log 2>&1
  rc=$?
  { echo "==== C++ runner: ${ARGS[*]}"; cat /tmp/replayssm_runner.log; } >>"$OUT/bench.log"
  record runner "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED(rc=$rc)")" $((SECONDS - t0)) "$(tail -n 1 /tmp/replayssm_runner.log)"
fi

# ---- summary ---------------------------------------------------------------------------------
echo
echo "== summary ($((SECONDS - run_start)) s; logs in $OUT)"
printf '%-10s %-14s %7s  %s\n' stage status seconds detail
for row in "${summary[@]}"; do
  IFS='|' read -r s st sec det <<<"$row"
  printf '%-10s %-14s %7s  %s\n' "$s" "$st" "$sec" "$det"
done
exit $any_failed
