#!/usr/bin/env bash
# docs/prepared/m2-decode-mma-lean-loop.patch measured and checked. Two changes to the Mamba-2 replay
# kernel (mamba2_decode), both meant to leave every result bit-identical (the A/B's gate errors must
# match):
#  1. the tensor-core state-and-output stream (ReplayMmaStream::run_tiles, mamba2/replay_mma.cuh)
#     with its addresses set up once, C read from shared memory per tile, whole tiles loaded without
#     tests, a loop of its own for flush rows (kStore) and the first k-step out of the k-step loop:
#     ~125 / ~150 SASS instructions per tile (non-flush / flush rows, B <= 16, sm_90a) against
#     main's ~217 / ~290; 64 registers and no spill on sm_90a and sm_100a;
#  2. entry_terms takes B_j . C only for the entries the output terms read (none on a
#     state-and-output row that does not flush, the new token's on a flush row), in every replay
#     instance: the output-only instances' SASS is rescheduled too, so the A/B runs both routes.
# Prepare where the git history is: scripts/ab_bench.sh --prepare HEAD; git apply
# docs/prepared/m2-decode-mma-lean-loop.patch; cp docs/prepared/m2-decode-mma-lean-loop.sh scripts/.
# Then on the GPU machine, two calls (carry .whl, ab_base):
#   MODE=ab bash scripts/m2-decode-mma-lean-loop.sh     # ~7 min: A/B of both routes (the launcher's
#                                                       # rule: tensor cores at B = 16 / 32 and at batch
#                                                       # 1-2), batch 1-512, then B = 8 batch 1, then the
#                                                       # tree at B = 8, batch 64 / 256, forced each way
#   MODE=tests bash scripts/m2-decode-mma-lean-loop.sh  # ~9 min: every Mamba-2 GPU test, memcheck and
#                                                       # racecheck on the tensor-core forms
# Merge if the gates match, the tests pass, the sanitizers are clean and the state-and-output cycle
# gains at batch 256 with the output-only rows and batch 1 level or better. Written in session 45
# (no device lent); its index arithmetic is checked lane by lane against main's form in
# bench/results/h200-2026-12-04-s45/prepared/emu_lean_loop.py.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
tc_forms="(update_forms and tensor_cores) or (launcher_choice and 2) or update_tensor_cores_whole_heads"
show() { grep -E 'm2_(so|oo)|FAILED|rc=|built' "$1" | awk '{print $1,$2,$3,$4,$(NF-2),$(NF-1),$NF}'; grep '^gates:' "$1" | cut -c1-200; }
if [[ ${MODE:-ab} == ab ]]; then
  mkdir -p "$OUT/ab" "$OUT/b8"
  OUT=$OUT/ab BUILD_TIMEOUT=250 BENCH_TIMEOUT=170 bash scripts/ab_bench.sh --sections m2 --routes output_only,state_and_output \
    --batches 1,8,64,256,512 -B 16,32 --budget-s 120 > "$OUT/ab.txt" 2>&1
  show "$OUT/ab.txt"; echo "[$((SECONDS - t0)) s] ab, B = 16 / 32"
  AB_KEEP_BASE=1 OUT=$OUT/b8 BENCH_TIMEOUT=60 bash scripts/ab_bench.sh --sections m2 --routes state_and_output \
    --batches 1 -B 8 --budget-s 20 > "$OUT/ab_b8.txt" 2>&1
  show "$OUT/ab_b8.txt"; echo "[$((SECONDS - t0)) s] ab, B = 8 batch 1"
  # B = 8 with whole heads, where main's launcher keeps the CUDA cores (they beat session 36's loop
  # there: nano batch 256 336.1 against 353.0 us): the tree's build forced each way, a process each,
  # for the launcher rule if the new loop turns that around.
  for mma in 1 0; do
    REPLAYSSM_M2_DECODE_MMA=$mma timeout 150 python3 -m replayssm_ext.benchmark --sections m2 --routes state_and_output \
      --batches 64,256 -B 8 --budget-s 45 --out "$OUT/b8_mma$mma" > "$OUT/b8_mma$mma.log" 2>&1
    echo "B = 8, REPLAYSSM_M2_DECODE_MMA=$mma: rc=$?"; grep -E '^m2_so_(cycle|nonflush|flush) ' "$OUT/b8_mma$mma.log"
  done
  echo "[$((SECONDS - t0)) s] B = 8 forced"
  tar czf "$OUT/ab.tgz" -C "$OUT" ab b8 b8_mma1 b8_mma0 && rm -rf "$OUT/ab" "$OUT/b8" "$OUT/b8_mma1" "$OUT/b8_mma0"
else
  OUT=$OUT STAGES=build BUILD_TIMEOUT=250 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
  echo "build [$((SECONDS - t0)) s]"; grep -E "^== build" "$OUT/build_run.log"
  timeout 240 python3 -m pytest tests/test_mamba2_cuda.py tests/test_mamba2_ops.py -q -rs -n 14 -p no:cacheprovider > "$OUT/tests.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; grep -E "passed|failed" "$OUT/tests.log" | tail -n 2
  left=$((585 - SECONDS + t0))
  for tool in memcheck racecheck; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $left compute-sanitizer --tool $tool --error-exitcode 97 --print-limit 20 \
      python3 -m pytest -q -rs -p no:cacheprovider tests/test_mamba2_cuda.py -k "$tc_forms" > "$OUT/$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
fi
