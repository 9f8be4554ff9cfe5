#!/usr/bin/env bash
# bench/results/h100-2026-12-06-s58/dropped-m2-so-l2-lead.patch (session 57): one GPU call from the repository root of main with
# ab_base prepared from main (`scripts/ab_bench.sh --prepare HEAD`, carry ".whl" and "ab_base") and
# the patch NOT applied:
#   bash docs/prepared/m2-so-l2-lead.sh
# It applies the patch (the state-and-output route's tensor-core update asks L2 for the tile `lead`
# tiles ahead, a launch parameter, 2 as before; REPLAYSSM_M2_DECODE_L2 overrides it), then:
# 1. the tree against main at the default lead (the m2 section, state-and-output route, nano /
#    super, batch 1 / 256, B = 16; the results must be bit-identical: the gates' errors equal);
# 2. on the tree, leads 2 / 3 / 4 / 1 on an H100's 96 and 80 SMs (--sms: the H200's bandwidth per
#    SM, which the route cannot hide, docs/perf-notes.md "Method notes", session 57) and on all
#    SMs, batch 256, B = 16 and 32. On an H200, the whole device only. ~8 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
export REPLAYSSM_FAMILIES=mamba2
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git apply --check bench/results/h100-2026-12-06-s58/dropped-m2-so-l2-lead.patch 2>/dev/null && git apply bench/results/h100-2026-12-06-s58/dropped-m2-so-l2-lead.patch
git diff --quiet -- csrc && { echo "patch not applied"; exit 1; }
BUILD_TIMEOUT=300 BENCH_TIMEOUT=120 scripts/ab_bench.sh --sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b \
  --routes state_and_output -B 16 --batches 1,256 --budget-s 40 > "$OUT/ab.txt" 2>&1
grep -E 'rc=|built|FAILED' "$OUT/ab.txt"; grep '^gates' "$OUT/ab.txt" | cut -c1-200
sed -n '/us per step/,$p' "$OUT/ab.txt" | grep -E "^m2_so" | head -20
echo "ab [$((SECONDS - t0)) s]"
wheres=(132 96 80); nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && wheres=(132)
for where in "${wheres[@]}"; do
  extra=(); [[ $where != 132 ]] && extra=(--sms "$where")
  for lead in 2 3 4 1; do
    REPLAYSSM_M2_DECODE_L2=$lead timeout 90 python3 -m replayssm_ext.benchmark --sections m2 --routes state_and_output \
      --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16,32 --batches 256 --budget-s 60 "${extra[@]}" \
      --out "$OUT/r_${where}_$lead" > "$OUT/r_${where}_$lead.log" 2>&1
    echo "$where SMs lead $lead rc=$? [$((SECONDS - t0)) s]"
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
res = {}
for f in glob.glob(f"{sys.argv[1]}/r_*/bench.json"):
    where, lead = os.path.basename(os.path.dirname(f))[2:].split("_")
    for r in json.load(open(f))["rows"]:
        if r["kernel"].startswith("m2_so"):
            res.setdefault((int(where), r["kernel"], r["geometry"], r["B"]), {})[lead] = r["us"]
for k in sorted(res, key=lambda k: (-k[0], k[1:])):
    v = res[k]
    print(f"{k[0]:3d} SMs {k[1]:15s} {k[2]:22s} B={k[3]:<3} " + "  ".join(
        f"L{l} {v[l]:8.2f}" + (f" x{v[l] / v['2']:.3f}" if l != "2" and "2" in v else "") for l in sorted(v)))
PY
tar -czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d r_* ab_*) 2>/dev/null && rm -rf "$OUT"/r_* "$OUT"/ab_*
