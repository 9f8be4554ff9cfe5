#!/usr/bin/env bash
# Session 63, call 5, as run (one command line from the repository root of commit fa01653, carry ".whl"):
# the merged nine-CTA rule's tests on the GPU.
source scripts/device_env.sh && export REPLAYSSM_FAMILIES=mamba2 && nvidia-smi --query-gpu=name --format=csv,noheader; (timeout 200 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo build rc=$? [$SECONDS s]) && timeout $((285 - SECONDS)) python3 -m pytest tests/test_mamba2_cuda.py -q -rf -n 14 -p no:cacheprovider -k "update_forms or nine or steep_decay or launcher_choice or mma_override or whole_heads or bit_identical" > $OUT/tests.log 2>&1; echo tests rc=$? [$SECONDS s]; grep -E "FAILED|ERROR" $OUT/tests.log | head; tail -n 2 $OUT/tests.log
