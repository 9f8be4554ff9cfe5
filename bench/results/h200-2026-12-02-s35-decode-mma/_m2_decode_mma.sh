#!/usr/bin/env bash
# Session 35 (delete before merging, keep with the results): the state-and-output route's rank
# update on tensor cores (mamba2/replay_mma.cuh), measured against main and tested.
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry .whl, ab_base)
#   bash scripts/_m2_decode_mma.sh ab      # Mamba-2-only builds; A/B of the decode rows (both routes,
#                                          # nano and super, batch 1-512, B = 16 / 32), gates compared;
#                                          # then the new tests, and ncu of the nano state-and-output
#                                          # non-flush step with each update
#   bash scripts/_m2_decode_mma.sh final   # the merged form: A/B of the state-and-output rows, every
#                                          # Mamba-2 GPU test, memcheck and racecheck of two long runs
#   bash scripts/_m2_decode_mma.sh rule    # the launcher rule narrowed after `final`: batch 1 / 8 A/B
#   bash scripts/_m2_decode_mma.sh full    # every Mamba-2 GPU test
#   bash scripts/_m2_decode_mma.sh san     # memcheck and racecheck of the new tests
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _m2_decode_mma.sh ab|final|rule|full|san"}
t0=$SECONDS
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=170 bash scripts/ab_bench.sh --sections m2 --batches 1,64,256,512 -B 16,32 \
    --budget-s 150 > "$OUT/ab.txt" 2>&1
  grep -E 'm2_|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}' | head -90
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log
  timeout 200 python3 -m pytest -q -rs -n 14 tests/test_mamba2_cuda.py -k "update_forms or update_tensor or mma_override or update_launcher" > "$OUT/tests_new.log" 2>&1
  tail -5 "$OUT/tests_new.log"
  echo "[$((SECONDS - t0)) s] new tests"
  # ncu of the nano state-and-output non-flush step (hist 8, batch 256) with each update.
  for m in 1 0; do
    REPLAYSSM_M2_DECODE_MMA=$m timeout 100 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section LaunchStats -k regex:mamba2_replay_kernel --launch-skip 3 --launch-count 1 \
      -o "$OUT/so_mma$m" python3 bench/profile_step.py --op mamba2_decode --geometry nemotron3-nano-4b --batch 256 \
      --hist 8 --route state_and_output > "$OUT/ncu_run$m.log" 2>&1
    ncu --import "$OUT/so_mma$m.ncu-rep" --page details > "$OUT/so_mma$m.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc|L1/TEX Hit|Mem Busy|Max Bandwidth|Stall" "$OUT/so_mma$m.txt" | head -30
  done
  echo "[$((SECONDS - t0)) s] ncu"
  ;;
final)
  # The merged form (the launcher's rule: tensor cores where P is split): A/B of the state-and-output
  # rows, every Mamba-2 GPU test, memcheck and racecheck of two tensor-core long runs.
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1,8,64,256 -B 16,32 --budget-s 90 > "$OUT/ab.txt" 2>&1
  grep -E 'm2_so|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}' | head -60
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log
  timeout 200 python3 -m pytest -q -rs -n 14 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  left=$((575 - (SECONDS - t0)))
  for tool in memcheck racecheck; do
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -v -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "update_forms and tensor_cores and (p40 or super_b32)" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  ;;
rule)
  # The launcher rule narrowed after `final` (host code only; the kernels are final's): A/B of the
  # state-and-output rows at batch 1 and 8, then the new tests.
  BUILD_TIMEOUT=200 BENCH_TIMEOUT=60 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1,8 -B 16,32 --budget-s 30 > "$OUT/ab.txt" 2>&1
  grep -E 'm2_so|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}' | head -30
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log
  timeout 60 python3 -m pytest -q -rs -n 14 tests/test_mamba2_cuda.py -k "update_forms or update_tensor or mma_override or update_launcher or aligned_and_misaligned" > "$OUT/tests_new.log" 2>&1
  tail -3 "$OUT/tests_new.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
full)
  timeout 560 python3 -m pytest -q -rs -n 14 tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
san)
  if ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
    timeout 240 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
  fi
  left=$((560 - (SECONDS - t0)))
  for tool in memcheck racecheck; do
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -v -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "update_forms and tensor_cores and (p40 or super_b32 or b1)" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  ;;
*) echo "unknown stage $stage (ab, final, rule, full, san)" >&2; exit 2 ;;
esac
