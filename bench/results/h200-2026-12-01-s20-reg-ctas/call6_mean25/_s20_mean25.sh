#!/usr/bin/env bash
# Session 20 (delete before merging): the 5-CTA register-stream rule under the realistic acceptance
# (mean2.5: truncated geometric, mean 2.5 of 4), T = 8: 4, 5 and the launcher's choice, one process
# each, Qwen3.5-4B batch 64 / 80 / 256 and 122B 32 / 40 / 256. One call, carry .whl.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 220 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
for ctas in 4 5 launcher; do
  [[ $ctas == launcher ]] && unset REPLAYSSM_GDN_SPEC_REG_CTAS || export REPLAYSSM_GDN_SPEC_REG_CTAS=$ctas
  for geo in "qwen3.5-4b 64,80,256" "qwen3.5-122b 32,40,256"; do
    set -- $geo; name=${ctas}_${1#qwen3.5-}
    timeout 90 python3 -m replayssm_ext.benchmark --sections spec -B 16 --accept mean2.5 --geometries $1 --batches $2 \
      --spec-tokens 8 --out "$OUT/b_$name" > "$OUT/b_$name.log" 2>&1
    echo "$name: $(grep -E '\] gdn_spec_cycle' "$OUT/b_$name.log" | awk '{printf "%s/%s/%s %s | ", $4, $5, $7, $9}')"
    rm -rf "$OUT/b_$name"
  done
done
unset REPLAYSSM_GDN_SPEC_REG_CTAS
echo "[$((SECONDS - t0)) s] bench"
tar czf "$OUT/bench.tgz" -C "$OUT" $(cd "$OUT" && ls b_*.log) && rm -f "$OUT"/b_*.log
