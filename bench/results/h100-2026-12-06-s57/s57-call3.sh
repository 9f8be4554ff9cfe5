#!/usr/bin/env bash
# Session 57, call 3, from the repository root of main (carry ".whl"):
#   bash bench/results/h100-2026-12-06-s57/s57-call3.sh
# The SM count a green context really gets (smid_probe.py), then the GDN window kernel's L2 lead
# (REPLAYSSM_GDN_L2; the launcher's: 1 chunk for the T = 4 pairs, 0 otherwise) at T = 2 / 4, spec
# section only (the snapshot baseline reads the variable too: its rows are not the comparison),
# Qwen3.5-4B and 122B, on the whole device (batch 1 / 64 / 256) and on 96 SMs (batch 256). ~6 min.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 100 python3 bench/results/h100-2026-12-06-s57/smid_probe.py 2>&1 | tail -8
timeout 330 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
for where in full sms96; do
  for lead in 1 2 3 0; do
    if [[ $where == full ]]; then extra=(--batches 1,64,256); else extra=(--batches 256 --sms 96); fi
    REPLAYSSM_GDN_L2=$lead timeout 100 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b,qwen3.5-122b \
      -B 16 --spec-tokens 2,4 --accept all --budget-s 60 "${extra[@]}" --out "$OUT/r_${where}_$lead" > "$OUT/r_${where}_$lead.log" 2>&1
    echo "$where lead $lead rc=$? [$((SECONDS - t0)) s]"
    [[ $where == sms96 && $lead == 0 ]] && break
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
res = {}
for f in glob.glob(f"{sys.argv[1]}/r_*/bench.json"):
    where, lead = os.path.basename(os.path.dirname(f))[2:].rsplit("_", 1)
    for r in json.load(open(f))["rows"]:
        if r["kernel"] == "gdn_spec_cycle":
            res.setdefault((where, r["geometry"], r["batch"], r["T"]), {})[lead] = r
for k in sorted(res):
    v = res[k]; base = v.get("1")
    cells = "  ".join(f"L{l} {v[l]['us']:8.2f}" + (f" ({100 * v[l]['copy_frac']:4.1f}%)" if v[l].get("copy_frac") else "")
                      + (f" x{v[l]['us'] / base['us']:.3f}" if base and l != "1" else "") for l in sorted(v))
    print(f"{k[0]:6s} {k[1]:13s} b={k[2]:<4} T={k[3]}  {cells}")
PY
tar -czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d r_*) && rm -rf "$OUT"/r_*
