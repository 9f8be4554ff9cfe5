#!/usr/bin/env bash
# Kept as session 63 ran it, as docs/prepared/ncu-at-sms.sh on main 5047c08; it runs from there, so to
# repeat it check out 5047c08. In session 63 its Mamba-2 kernels were call 2's patched build (README).
# Session 58, prepared, not run: where the two H200-bound routes lose their time when each SM has an
# H200's share of the bandwidth. One GPU call on an H100 from the repository root of main (carry
# ".whl"):
#   bash docs/prepared/ncu-at-sms.sh
# Nsight Compute on main's kernels (bench/profile_step.py --sms, scripts/ncu_spec_profiles.sh's SMS):
# the Mamba-2 state-and-output route (FAMILY=so256: non-flush hist 8 / 15, flush hist 15, and the
# output-only non-flush step beside it) on 80 SMs and on all 132, and the GDN window kernel
# (FAMILY=gdn: Qwen3.5-4B T = 4 non-flush / flush, T = 2 non-flush) on 88. What to read: the stall
# reasons and achieved occupancy of the same launch at 80 against 132 SMs (session 58 found the
# state-and-output route neither short of L2 lead nor bound by issue at 80 SMs). ~8 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2,gdn
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
timeout 60 python3 bench/profile_step.py --op mamba2_decode --route state_and_output --sms 80 --iters 20
timeout 60 python3 bench/profile_step.py --op mamba2_decode --route state_and_output --iters 20
for run in "so256 80" "so256 " "gdn 88"; do
  set -- $run
  echo "== FAMILY=$1 SMS=${2:-all} [$((SECONDS - t0)) s]"
  FAMILY=$1 SMS=${2:-} timeout $((590 - SECONDS)) scripts/ncu_spec_profiles.sh
done
