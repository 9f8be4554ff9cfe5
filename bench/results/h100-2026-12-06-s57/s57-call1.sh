#!/usr/bin/env bash
# Session 57, call 1, from the repository root of main (carry ".whl"):
#   bash bench/results/h100-2026-12-06-s57/s57-call1.sh
# 1. which torch.cuda.green_contexts API this machine's torch has; 2. build every family;
# 3. the benchmark on the whole device and on 96 of its SMs (--sms 96), same arguments, one process
# each: Mamba-2 decode (nano, super), GDN decode and spec verify (Qwen3.5-4B T = 2 / 4, Mamba-2 T =
# 4), batch 256, B = 16; 4. racecheck of the GDN decode long runs (6d5695d had none). ~8 minutes.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && source scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 - <<'PY'
import torch
from torch.cuda import green_contexts as g
print("torch", torch.__version__, "GreenContext:", [a for a in dir(g.GreenContext) if not a.startswith("_")])
PY
timeout 330 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
echo "build rc=$? [$((SECONDS - t0)) s]"; grep -E "error|Error" "$OUT/build.log" | head -5
ARGS=(--sections m2,gdn,spec --geometries nemotron3-nano-4b,nemotron3-super-120b,qwen3.5-4b --batches 256 -B 16
      --spec-tokens 2,4 --accept all --budget-s 90)
runs=(full sms96)
# On an H200 the target rows are measured as they are (batch 1 as well; two processes), not modelled.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ARGS=(--sections m2,gdn,spec --geometries nemotron3-nano-4b,nemotron3-super-120b,qwen3.5-4b --batches 1,256 -B 16
        --spec-tokens 2,4,8 --accept all --budget-s 110)
  runs=(full full2)
fi
for run in "${runs[@]}"; do
  extra=(); [[ $run == sms96 ]] && extra=(--sms 96)
  timeout 150 python3 -m replayssm_ext.benchmark "${ARGS[@]}" "${extra[@]}" --out "$OUT/b_$run" > "$OUT/b_$run.log" 2>&1
  echo "bench $run rc=$? [$((SECONDS - t0)) s]"
  grep -E "SM partition|copy:|ERROR|^gates" "$OUT/b_$run.log" | head -8
done
python3 - "$OUT" <<'PY'
import json, sys
import os
names = [k for k in ("sms96", "full2") if os.path.exists(f"{sys.argv[1]}/b_{k}/bench.json")]
runs = {k: json.load(open(f"{sys.argv[1]}/b_{k}/bench.json")) for k in ["full"] + names}
other = names[0]
key = lambda r: (r["section"], r["kernel"], r["geometry"], r["batch"], r.get("T"))
rows = {k: {key(r): r for r in d["rows"]} for k, d in runs.items()}
for k in rows["full"]:
    a, b = rows["full"][k], rows[other].get(k)
    if b is None: continue
    pct = lambda r: f"{100 * r['copy_frac']:5.1f}%" if r.get("copy_frac") else "     -"
    print(f"{k[1]:18s} {k[2]:22s} b={k[3]:<4} T={str(k[4]):4s} full {a['us']:9.2f} {pct(a)}   {other} {b['us']:9.2f} {pct(b)}  x{b['us'] / a['us']:.3f}")
PY
echo "compare [$((SECONDS - t0)) s]"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $((570 - SECONDS)) compute-sanitizer --tool racecheck --error-exitcode 97 \
  --print-limit 20 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gdn_cuda.py -k "test_decode_long_run" \
  > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? [$((SECONDS - t0)) s]"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -4
