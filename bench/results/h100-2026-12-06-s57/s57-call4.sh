#!/usr/bin/env bash
# Session 57, call 4, from the repository root of main with the launcher's new rule (the T = 4 verify
# pairs lead 2 chunks; carry ".whl"):
#   bash bench/results/h100-2026-12-06-s57/s57-call4.sh
# The tree's rule against REPLAYSSM_GDN_L2=1 (the old T = 4 rule; it also sets T = 2's lead, 0 in
# both rules, to 1), two alternating pairs of processes, on 96 SMs (batch 256, both acceptance
# modes) and on all 132 (batch 256 / 512); then the GDN spec-verify GPU tests. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
for rep in 1 2; do
  for where in sms96 full; do
    for rule in tree old; do
      envs=(X=1); [[ $rule == old ]] && envs=(REPLAYSSM_GDN_L2=1)
      if [[ $where == full ]]; then extra=(--batches 256,512 --accept all); else extra=(--batches 256 --accept all,mean2.5 --sms 96); fi
      env "${envs[@]}" timeout 90 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b,qwen3.5-122b \
        -B 16 --spec-tokens 2,4 --budget-s 60 "${extra[@]}" --out "$OUT/r_${where}_${rule}_$rep" > "$OUT/r_${where}_${rule}_$rep.log" 2>&1
      echo "$where $rule $rep rc=$? [$((SECONDS - t0)) s]"
    done
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
res = {}
for f in glob.glob(f"{sys.argv[1]}/r_*/bench.json"):
    where, rule, rep = os.path.basename(os.path.dirname(f))[2:].split("_")
    for r in json.load(open(f))["rows"]:
        if r["kernel"] in ("gdn_spec_cycle", "gdn_spec_base"):
            res.setdefault((where, r["kernel"], r["geometry"], r["batch"], r["T"], r["accept"]), {})[(rule, rep)] = r["us"]
for k in sorted(res):
    v = res[k]
    old = [v[("old", r)] for r in "12" if ("old", r) in v]; new = [v[("tree", r)] for r in "12" if ("tree", r) in v]
    if old and new:
        print(f"{k[0]:6s} {k[1]:15s} {k[2]:13s} b={k[3]:<4} T={k[4]} {k[5]:8s} old(L2=1) " + " / ".join(f"{x:8.2f}" for x in old)
              + "   tree " + " / ".join(f"{x:8.2f}" for x in new) + f"   x{(sum(new) / len(new)) / (sum(old) / len(old)):.3f}")
PY
tar -czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d r_*) && rm -rf "$OUT"/r_*
timeout $((440 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider -k spec > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
