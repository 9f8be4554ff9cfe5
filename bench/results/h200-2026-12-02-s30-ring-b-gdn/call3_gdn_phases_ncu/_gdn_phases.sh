#!/usr/bin/env bash
# Session 30 (keep with the results): where GDN's T = 4 spec step spends its time, on main's kernels.
# Per-phase launch times at the benchmark's clocks (bench/profile_step.py: every row at one phase,
# CUDA events, median of 10 launches; not graph replays), then Nsight Compute of the T = 4 non-flush
# and flush launches and T = 2 non-flush (scripts/ncu_spec_profiles.sh, FAMILY=gdn).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
step() {  # label, env assignments..., -- profile_step arguments
  local label=$1; shift; local envs=(); while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  local line; line=$(env "${envs[@]}" timeout 60 python3 bench/profile_step.py --iters 20 "$@" 2>&1 | tail -1)
  echo "$label | ${envs[*]} | $* | $line" | tee -a "$OUT/phases.txt"
}
G=(--geometry qwen3.5-4b --batch 256)
for h in 0 4 8 12; do step "T4 nonflush h$h" X=1 -- --op gdn_spec_verify "${G[@]}" --T 4 --hist $h; done
for h in 4 12; do step "T4 flush h$h" X=1 -- --op gdn_spec_verify "${G[@]}" --T 4 --hist $h --flush; done
step "T4 nonflush h8 one head" REPLAYSSM_GDN_SPEC_HEADS=1 -- --op gdn_spec_verify "${G[@]}" --T 4 --hist 8
step "T4 flush h12 one head" REPLAYSSM_GDN_SPEC_HEADS=1 -- --op gdn_spec_verify "${G[@]}" --T 4 --hist 12 --flush
step "T2 nonflush h8" X=1 -- --op gdn_spec_verify "${G[@]}" --T 2 --hist 8
step "T2 flush h16" X=1 -- --op gdn_spec_verify "${G[@]}" --T 2 --hist 16 --flush
step "T1 nonflush h8" X=1 -- --op gdn_spec_verify "${G[@]}" --T 1 --hist 8
step "T8 nonflush h8" X=1 -- --op gdn_spec_verify "${G[@]}" --T 8 --hist 8
step "T8 flush h8" X=1 -- --op gdn_spec_verify "${G[@]}" --T 8 --hist 8 --flush
step "decode nonflush h8" X=1 -- --op gdn_decode "${G[@]}" --hist 8
step "decode flush h15" X=1 -- --op gdn_decode "${G[@]}" --hist 15 --flush
step "classic" X=1 -- --op gdn_state_update "${G[@]}"
echo "[$((SECONDS - t0)) s] phases"
FAMILY=gdn timeout 420 bash scripts/ncu_spec_profiles.sh 2>&1 | tee "$OUT/ncu_summary.txt" | grep -E '==|Duration|DRAM Through|Registers|Achieved'
echo "[$((SECONDS - t0)) s] ncu"
