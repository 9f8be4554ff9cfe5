#!/usr/bin/env bash
# docs/prepared/m2-so-tile-buffers.patch measured and checked. The Mamba-2 decode's tensor-core
# state-and-output update (ReplayMmaStream, mamba2/replay_mma.cuh) with its state through k
# shared-memory tile buffers (16 rows each) filled by bulk copies (cp.async.bulk + mbarriers, from
# CUTLASS's cute::SM90_BULK_COPY_G2S and cutlass::arch barriers) instead of registers loaded from
# global memory: the first k tiles are requested as soon as the slot is known, so they are on their
# way through the CTA's prologue (cursors, staged entries, three barriers), and a buffer is refilled
# with the tile k on once every warp has its unit of it in registers. One build: the register
# form's kernel is unchanged (sm_90a and sm_100a SASS equal to main's but for parameter offsets),
# and REPLAYSSM_M2_DECODE_MMA_TILE_BUFFERS=k (read at every launch) picks the form, so the forms
# compare in alternating processes. Shared memory per CTA, nano B = 16: 25.0 KB in registers (8
# CTAs per SM, the 64-register bound), +8.2 KB per buffer: k = 1, 2, 3, 5 (the whole chunk) -> 6,
# 5, 4, 3 CTAs per SM; super: 21.1 KB, k = 4 (whole chunk) -> 4.
# Prepare where the git history is: git apply docs/prepared/m2-so-tile-buffers.patch; cp
# docs/prepared/m2-so-tile-buffers.sh scripts/. Then on the GPU machine (carry .whl), two calls:
#   MODE=bench bash scripts/m2-so-tile-buffers.sh   # ~8 min: build, then the state-and-output route
#                                                   # at B = 16 (nano, super; batch 1 / 256 / 512) for
#                                                   # k = 0, 5, 2, 1, 3, 0, 5 in that order, and B = 32
#                                                   # at batch 256 for k = 0, 2, 0, 2
#   MODE=tests bash scripts/m2-so-tile-buffers.sh   # ~6 min: build, the tensor-core tests (every form),
#                                                   # memcheck and racecheck on the buffered forms
#                                                   # (racecheck may not model the bulk copies' async
#                                                   # proxy: read a reported hazard between a copy and
#                                                   # the shared loads before trusting or dismissing it)
#   MODE=ncu K=0 bash scripts/m2-so-tile-buffers.sh # ~6 min: build, scripts/ncu_spec_profiles.sh's
#                                                   # so256 family with K tile buffers (K=0: main's
#                                                   # kernel): issue-bound or short of bytes in flight?
# Merge (with a launcher rule from the numbers, and the CUTLASS includes confined to the units that
# instantiate the form: they add ~6.5 s per arch to every Mamba-2 unit) if some k gains at batch
# 256 and the tests and sanitizers pass; else drop it with its numbers. Written in session 51 (no
# device lent).
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
OUT=$OUT STAGES=build BUILD_TIMEOUT=240 bash scripts/gpu_check.sh > "$OUT/build_run.log" 2>&1
echo "build [$((SECONDS - t0)) s]"; grep -E "^== build|error" "$OUT/build_run.log" | head
show() { grep -E '^m2_so_(cycle|nonflush|flush) ' "$1" | awk '{print $1,$2,$3,$4,$5,$(NF-2)}'; grep -E '^gates:|FAILED|Error' "$1" | cut -c1-200; }
if [[ ${MODE:-bench} == bench ]]; then
  i=0
  for k in 0 5 2 1 0 5; do
    i=$((i + 1))
    REPLAYSSM_M2_DECODE_MMA_TILE_BUFFERS=$k timeout 80 python3 -m replayssm_ext.benchmark --sections m2 \
      --routes state_and_output --batches 1,256,512 -B 16 --budget-s 28 --out "$OUT/b16_${i}_k$k" \
      > "$OUT/b16_${i}_k$k.log" 2>&1
    echo "== B = 16, k = $k (process $i) rc=$? [$((SECONDS - t0)) s]"; show "$OUT/b16_${i}_k$k.log"
  done
  i=0
  for k in 0 2; do
    i=$((i + 1))
    REPLAYSSM_M2_DECODE_MMA_TILE_BUFFERS=$k timeout 50 python3 -m replayssm_ext.benchmark --sections m2 \
      --routes state_and_output --batches 256 -B 32 --budget-s 20 --out "$OUT/b32_${i}_k$k" \
      > "$OUT/b32_${i}_k$k.log" 2>&1
    echo "== B = 32, k = $k (process $i) rc=$? [$((SECONDS - t0)) s]"; show "$OUT/b32_${i}_k$k.log"
  done
elif [[ $MODE == ncu ]]; then
  REPLAYSSM_M2_DECODE_MMA_TILE_BUFFERS=${K:-0} FAMILY=so256 OUT=$OUT bash scripts/ncu_spec_profiles.sh \
    > "$OUT/ncu_k${K:-0}.log" 2>&1
  echo "ncu rc=$? [$((SECONDS - t0)) s]"; cat "$OUT/ncu_k${K:-0}.log" | head -60
else
  forms="update_forms or whole_heads or outside_cursor_contract or tile_buffers_override or mma_override or launcher_choice"
  timeout 200 python3 -m pytest -q tests/test_mamba2_cuda.py -k "$forms" > "$OUT/test.log" 2>&1
  echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -3 "$OUT/test.log"
  buffered="(update_forms and tile_buffers) or (whole_heads and tile_buffers) or outside_cursor_contract"
  OUT=$OUT STAGES=sanitize SANITIZE_TIMEOUT=150 SANITIZE_ARGS="tests/test_mamba2_cuda.py -x -k '$buffered'" \
    bash scripts/gpu_check.sh > "$OUT/sanitize_run.log" 2>&1
  echo "sanitizers rc=$? [$((SECONDS - t0)) s]"; grep -E "memcheck|racecheck" "$OUT/sanitize_run.log" | tail -4
fi
