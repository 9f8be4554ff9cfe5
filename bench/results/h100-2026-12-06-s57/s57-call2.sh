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
# Which SMs a green context of N SMs really runs on: each program of a Triton kernel writes %smid.
timeout 120 python3 - <<'PY'
import torch, triton, triton.language as tl
from torch.cuda.green_contexts import GreenContext
@triton.jit
def smid_kernel(out_ptr):
    pid = tl.program_id(0)
    z = tl.zeros([1], tl.int32) + pid
    sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [z], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + pid + tl.arange(0, 1), sm)
n = 1 << 16
for sms in (None, 64, 80, 96, 112):
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    if sms is None:
        smid_kernel[(n,)](out)
    else:
        g = GreenContext.create(num_sms=sms, device_id=0); s = g.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            smid_kernel[(n,)](out)
        torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    used = torch.unique(out).tolist()
    print(f"asked {sms}: {len(used)} SMs used, ids {used[:6]}..{used[-3:]}")
PY
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
