#!/usr/bin/env bash
# Prepared in session 20 (delete before merging): the GDN register stream's 4- and 5-CTA instances
# under both acceptance modes, to set a rule that weighs the realistic one (session 20: 5 CTAs per SM
# gain 3 % all accepted at batch 256-512 but lose 1-2.4 % under mean2.5 there; at 4-6 waves they gain
# under both). One call (~5 min), carry .whl:
#   bash scripts/_gdn_reg_ctas_modes.sh
# GDN-only build; T = 8 and T = 6, Qwen3.5-4B batch 64-512 and 122B 32-256 (3.9 to 31 waves of 4 CTAs
# per SM), REPLAYSSM_GDN_SPEC_REG_CTAS = 4 and 5, each acceptance mode in its own process, two
# rounds. Then: keep the rule (more than four waves), bound it (e.g. 4-8 waves), or return to 4.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
for round in ${ROUNDS:-0 1}; do
  for mode in mean2.5 all; do
    for ctas in 4 5; do
      name=r${round}_${mode}_ctas$ctas
      REPLAYSSM_GDN_SPEC_REG_CTAS=$ctas timeout 90 python3 -m replayssm_ext.benchmark --sections spec -B 16 \
        --accept $mode --geometries qwen3.5-4b,qwen3.5-122b --batches 32,64,96,128,192,256,512 --spec-tokens 6,8 \
        --out "$OUT/$name" > "$OUT/$name.log" 2>&1
      echo "$name: $(grep -E '\] gdn_spec_cycle' "$OUT/$name.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
      rm -rf "$OUT/$name"
    done
  done
done
echo "[$((SECONDS - t0)) s] bench"
tar czf "$OUT/bench.tgz" -C "$OUT" $(cd "$OUT" && ls r*_ctas*.log) && rm -f "$OUT"/r*_ctas*.log
