#!/usr/bin/env bash
# Session 23 experiment (kept with the results, not merged): one build, then the replay kernel's
# header swapped between variants (ninja rebuilds only its dependants), each benchmarked in its own
# process on the same machine: which part of the token-first patch moved the nano batch-256 row.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
HDR=csrc/include/replayssm/mamba2/replay_kernel.cuh
ARGS=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --batches 1,8,256
      --routes output_only,state_and_output)
t0=$SECONDS
i=0
for v in ${VARIANTS:-t2 main tf lam t2nl t2}; do
  i=$((i + 1)); tag=${i}_$v
  cp scripts/_variants/$v.cuh $HDR && touch $HDR
  if ((i > 1)); then
    # Only the replay kernel's objects are rebuilt: the others are marked newer than the header,
    # and ninja's log (which would still call them stale) is dropped.
    sleep 1; find build -name '*.o' ! -name 'mamba2_replay_*' -exec touch {} +; rm -f build/*/.ninja_log
  fi
  timeout 200 python3 setup.py build_ext --inplace > "$OUT/build_$tag.log" 2>&1 || { echo "$v build FAILED"; tail -20 "$OUT/build_$tag.log"; continue; }
  echo "[$((SECONDS - t0)) s] $v built ($(grep -c 'nvcc' "$OUT/build_$tag.log") nvcc lines)"
  timeout 60 python3 -m replayssm_ext.benchmark "${ARGS[@]}" --out "$OUT/v_$tag" > "$OUT/v_$tag.log" 2>&1
  echo "$v rc=$? $(grep -E 'gates:' "$OUT/v_$tag.log")"
  grep -E '\] m2_(oo|so)_(cycle|nonflush) ' "$OUT/v_$tag.log" | awk -v v=$v '{print v, $3, $4, $5, $7}' | tr '\n' ';'; echo
done
tar czf "$OUT/variants.tgz" -C "$OUT" $(cd "$OUT" && ls -d v_* build_*) && rm -rf "$OUT"/v_* "$OUT"/build_*
