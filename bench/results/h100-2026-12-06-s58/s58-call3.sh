#!/usr/bin/env bash
# Session 58, call 3: main's Mamba-2 kernels (the deferred decay of call 2 dropped) under the new
# steep-decay test of the tensor-core update, which call 2 ran on the tree's kernels only.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
timeout 200 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build rc=$? [$((SECONDS - t0)) s]"
timeout 60 python3 -m pytest tests/test_mamba2_cuda.py -q -rf -p no:cacheprovider -k "steep_decay or (update_forms and nano)" \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 1 "$OUT/tests.log"
