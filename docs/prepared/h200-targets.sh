#!/usr/bin/env bash
# Session 59: the open target rows of issues 3 and 5 on main's kernels, for the first H200 call of a
# session (no H200 has come since session 50). One GPU call from the repository root of main (carry
# ".whl"):
#   bash docs/prepared/h200-targets.sh
# Builds the Mamba-2 and GDN kernels, then, B = 16, fp32 checkpoint, bf16 activations:
#   1. issue 3: Mamba-2 plain decode, both routes and our baseline, nano / super, batch 1 / 256
#      (the batch-1 cycle <= 4.6 us, state-and-output within 10 % of output-only at 256);
#   2. issue 5: speculative verify, all drafts accepted, nano / super T = 4 at batch 1 / 256 and
#      nano T = 8 at 256, snapshots side by side (nano 420, super 390, nano T = 8 540 us);
#   3. issue 5: Qwen3.5-4B T = 4 at batch 256 with main's L2 lead (2) and with REPLAYSSM_GDN_L2 = 1,
#      twice in alternation: the <= 200 us row, and the H200 A/B of session 57's lead that no session
#      has made (session 64's rule takes 2 on an H200 by its bandwidth per SM; if 1 wins here, the
#      rule's 30 GB/s threshold moves above the H200's ~37).
# On an H100 it runs the same and says so: the rows are then not the targets' own. ~8 minutes.
# QUICK=1 (for a budget worn down by failed machine starts, session 60): batch 256 only, the
# Mamba-2 decode routes and one GDN lead pair, no Mamba-2 spec rows; ~4-5 minutes.
# MIN=1 (session 61, for ~350-450 s left; session 62's request at 329 s was refused): the Mamba-2
# kernels alone, the decode routes at batch 1 / 256 (issue 3's batch-1 cycle and the routes'
# ratio); ~3 minutes.
# RACECHECK=1 (session 66): racecheck on the Mamba-2 tensor-core update's tests last, where the call
# is under 420 s by then.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
minimal=${MIN:-0}
export REPLAYSSM_FAMILIES=$( ((minimal)) && echo mamba2 || echo mamba2,gdn)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 330 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
bench() {  # name, timeout, benchmark args...: its timed rows (not the phase splits) printed at once
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m replayssm_ext.benchmark -B 16 --accept all --out "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? [$((SECONDS - t0)) s]"
  grep -E '\] (d2d_copy_kernel|(m2|gdn)_[a-z0-9_]*) .* us' "$OUT/$name.log" | grep -vE '_(nonflush|flush) ' | cut -c11-160
}
quick=${QUICK:-0}
((minimal)) && quick=0
gdn_reps="1 2"; ((quick)) && gdn_reps=1; ((minimal)) && gdn_reps=  # GDN lead pairs to run
bench m2_decode 100 --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
  --routes output_only,state_and_output --batches "$( ((quick)) && echo 256 || echo 1,256)" --budget-s 45
((quick || minimal)) || bench m2_spec_t4 90 --sections spec --geometries nemotron3-nano-4b,nemotron3-super-120b \
  --spec-tokens 4 --batches 1,256 --budget-s 40
for rep in $gdn_reps; do
  bench "gdn_l2main_$rep" 50 --sections spec --geometries qwen3.5-4b --spec-tokens 4 --batches 256 --budget-s 20
  REPLAYSSM_GDN_L2=1 bench "gdn_l21_$rep" 50 --sections spec --geometries qwen3.5-4b --spec-tokens 4 --batches 256 --budget-s 20
done
(( !quick && !minimal && SECONDS - t0 < 520 )) && bench m2_spec_t8 50 --sections spec --geometries nemotron3-nano-4b --spec-tokens 8 --batches 256 --budget-s 20
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/*/bench.json")):
    for r in json.load(open(f))["rows"]:
        if r["kernel"] == "commit":
            continue
        cf, sb = r.get("copy_frac"), r.get("speedup_vs_base")
        print(f"{os.path.basename(os.path.dirname(f)):14s} {r['kernel']:24s} {r['geometry']:20s} b={r['batch']:<4} "
              f"T={r.get('T', '-')!s:2s} {r['us']:9.2f} us  copy {100 * cf if cf else 0:5.1f} %  x_base {sb or 0:5.2f}")
PY
# RACECHECK=1 (session 66): then racecheck on the tensor-core update's tests from the same build,
# while time is left (session 66 merged the tile loop's carry-decay without it: its short form).
[[ ${RACECHECK:-0} == 1 ]] && (( SECONDS < 420 )) && m2_mma_racecheck
cd "$OUT" && tar -czf runs.tgz --exclude='*.png' $(ls -d */) *.log && rm -rf $(ls -d */) *.log
