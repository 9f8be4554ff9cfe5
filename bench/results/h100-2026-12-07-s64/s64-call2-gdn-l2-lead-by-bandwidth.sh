#!/usr/bin/env bash
# docs/prepared/gdn-l2-lead-by-bandwidth.patch (session 57): one GPU call from the repository root of
# main with the patch NOT applied (carry ".whl"):
#   bash docs/prepared/gdn-l2-lead-by-bandwidth.sh
# It applies the patch (the T = 4 verify pairs' L2 lead: 2 where the device's peak DRAM bandwidth per
# SM is above 30 GB/s, else 1; main takes 2 everywhere), builds the GDN kernels and runs the spec
# section (Qwen3.5-4B / 122B, T = 4, batch 256 / 512, all accepted) with the launcher's choice and
# with REPLAYSSM_GDN_L2 = 1 and 2, in that order twice. What to read: on an H100 the default must
# time as lead 1, on an H200 as lead 2, and on an H200 lead 2 against lead 1 is the measurement
# session 57 could not make (on an H100 with --sms 96 it was 2.1-3.4 % faster). Then the GDN spec
# tests. ~7 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=gdn
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -c "import torch; p = torch.cuda.get_device_properties(0); print('SMs', p.multi_processor_count, {k: getattr(p, k, None) for k in ('memory_clock_rate', 'memory_bus_width')})"
git apply --check docs/prepared/gdn-l2-lead-by-bandwidth.patch 2>/dev/null && git apply docs/prepared/gdn-l2-lead-by-bandwidth.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
for rep in 1 2; do
  for lead in rule 1 2; do
    envs=(X=1); [[ $lead != rule ]] && envs=(REPLAYSSM_GDN_L2=$lead)
    env "${envs[@]}" timeout 90 python3 -m replayssm_ext.benchmark --sections spec --geometries qwen3.5-4b,qwen3.5-122b \
      -B 16 --spec-tokens 4 --accept all --batches 256,512 --budget-s 60 --out "$OUT/r_${lead}_$rep" > "$OUT/r_${lead}_$rep.log" 2>&1
    echo "lead $lead rep $rep rc=$? [$((SECONDS - t0)) s]"
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
res = {}
for f in glob.glob(f"{sys.argv[1]}/r_*/bench.json"):
    lead, rep = os.path.basename(os.path.dirname(f))[2:].split("_")
    for r in json.load(open(f))["rows"]:
        if r["kernel"] == "gdn_spec_cycle":
            res.setdefault((r["geometry"], r["batch"]), {}).setdefault(lead, []).append(r["us"])
for k in sorted(res):
    print(f"{k[0]:13s} b={k[1]:<4} " + "   ".join(f"{l}: " + " / ".join(f"{x:8.2f}" for x in v) for l, v in sorted(res[k].items())))
PY
tar -czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d r_*) && rm -rf "$OUT"/r_*
timeout $((560 - SECONDS)) python3 -m pytest tests/test_gdn_cuda.py -q -rf -n 14 -p no:cacheprovider -k spec > "$OUT/tests.log" 2>&1
echo "tests rc=$? [$((SECONDS - t0)) s]"; tail -n 1 "$OUT/tests.log"
