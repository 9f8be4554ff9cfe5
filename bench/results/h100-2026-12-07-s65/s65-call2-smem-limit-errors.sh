#!/usr/bin/env bash
# docs/prepared/smem-limit-errors.patch (session 64): one GPU call from the repository root of main
# with the patch NOT applied (carry ".whl"):
#   bash docs/prepared/smem-limit-errors.sh
# It applies the patch (one allow_dynamic_smem in common/cuda_utils.cuh for both families' 48 KB
# opt-in: a CTA's shared memory above the device's per-block limit is refused with the arguments
# that set it, their values, the bytes needed and the limit; a failed device-attribute query clears
# its error), builds both families and runs the new tests (test_ring_too_long_for_shared_memory, 4
# Mamba-2 and 2 GDN cases), then the Mamba-2 and GDN GPU suites (every launch above 48 KB passes the
# new opt-in) one after the other in the time left. ~7-9 minutes; merge if all pass.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
git apply --check docs/prepared/smem-limit-errors.patch 2>/dev/null && git apply docs/prepared/smem-limit-errors.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
export REPLAYSSM_FAMILIES=mamba2,gdn
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
timeout 120 python3 -m pytest tests/test_mamba2_cuda.py tests/test_gdn_cuda.py -q -rf -p no:cacheprovider \
  -k test_ring_too_long_for_shared_memory > "$OUT/new_tests.log" 2>&1
echo "new tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|Error" "$OUT/new_tests.log" | head -5; tail -n 1 "$OUT/new_tests.log"
# One suite at a time, so that a call cut short still reports the suite that finished.
for suite in gdn mamba2; do
  timeout $((585 - SECONDS)) python3 -m pytest "tests/test_${suite}_cuda.py" -q -rf -n 14 -p no:cacheprovider \
    > "$OUT/${suite}_suite.log" 2>&1
  echo "$suite GPU suite rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/${suite}_suite.log" | head
  tail -n 1 "$OUT/${suite}_suite.log"
done
