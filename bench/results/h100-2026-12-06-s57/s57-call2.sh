#!/usr/bin/env bash
# Session 57, call 2 (after call 1 on the same machine or a fresh one; builds if needed), from the
# repository root of main (carry ".whl"):
#   bash bench/results/h100-2026-12-06-s57/s57-call2.sh
# The target rows against the SM count (--sms 64 / 80 / 112; call 1 ran 132 and 96), then on 96 SMs
# the launch-time knobs that exist for measurements: the GDN window kernel's L2 lead (REPLAYSSM_GDN_L2
# 0 / 2 / 3; the launcher's is 1 for the T = 4 pairs) and the Mamba-2 state-and-output update on the
# CUDA cores (REPLAYSSM_M2_DECODE_MMA=0; the launcher takes the tensor cores at B = 16). ~8 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
# (As run, an inline copy of smid_probe.py stood here and failed: Triton's jit wants its kernel in a
# file. Call 3 runs smid_probe.py.)
timeout 330 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"
bench() {  # label, env..., -- benchmark args
  local label=$1; shift
  local envs=(); while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 python3 -m replayssm_ext.benchmark "$@" --out "$OUT/b_$label" > "$OUT/b_$label.log" 2>&1
  echo "bench $label rc=$? [$((SECONDS - t0)) s]"; grep -E "ERROR|SM partition" "$OUT/b_$label.log" | head -3
}
TARGETS=(--sections m2,spec --geometries nemotron3-nano-4b,nemotron3-super-120b,qwen3.5-4b --batches 256 -B 16
         --spec-tokens 4 --accept all --budget-s 80)
for sms in 64 80 112; do bench "sms$sms" X=1 -- "${TARGETS[@]}" --sms $sms; done
GDN4=(--sections spec --geometries qwen3.5-4b --batches 256 -B 16 --spec-tokens 4 --accept all --budget-s 40 --sms 96)
bench gdn_l2_1 X=1 -- "${GDN4[@]}"
for lead in 0 2 3; do bench "gdn_l2_$lead" REPLAYSSM_GDN_L2=$lead -- "${GDN4[@]}"; done
SO=(--sections m2 --geometries nemotron3-nano-4b,nemotron3-super-120b --batches 256 -B 16
    --routes state_and_output --budget-s 60 --sms 96)
bench so_mma X=1 -- "${SO[@]}"
bench so_cuda_cores REPLAYSSM_M2_DECODE_MMA=0 -- "${SO[@]}"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/b_*/bench.json")):
    d = json.load(open(f)); label = os.path.basename(os.path.dirname(f))[2:]
    for r in d["rows"]:
        if r["batch"] != 256 or r["kernel"] == "commit": continue
        pct = f"{100 * r['copy_frac']:5.1f}%" if r.get("copy_frac") else "     -"
        print(f"{label:16s} {r['kernel']:18s} {r['geometry']:22s} T={str(r.get('T')):4s} {r['us']:9.2f} {pct}")
PY
