#!/usr/bin/env bash
# Session 22 experiment (not for merging): which launch sites lose with the programmatic-serialization
# attribute. One build; configs alternate over two rounds, one process each.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
timeout 300 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$((SECONDS - t0)) s] built"
for round in 0 1; do
  for cfg in on off nosnap nosnapspec; do
    export REPLAYSSM_PDL=1; unset REPLAYSSM_PDL_OFF
    case $cfg in
      off) export REPLAYSSM_PDL=0 ;;
      nosnap) export REPLAYSSM_PDL_OFF=m2_snap,gdn_snap, ;;
      nosnapspec) export REPLAYSSM_PDL_OFF=m2_snap,gdn_snap,m2_spec, ;;
    esac
    name=r${round}_$cfg
    timeout 90 python3 -m replayssm_ext.benchmark --sections spec --geometries nemotron3-nano-4b,qwen3.5-4b -B 16 \
      --batches 1,8 --spec-tokens 4,8 --accept all --out "$OUT/${name}_spec" > "$OUT/${name}_spec.log" 2>&1
    echo "$name: $(grep -E 'gates:|ERROR' "$OUT/${name}_spec.log" | head -2 | tr '\n' ' ')"
    rm -rf "$OUT/${name}_spec"
  done
  echo "[$((SECONDS - t0)) s] round $round"
done
tar czf "$OUT/sites.tgz" -C "$OUT" $(cd "$OUT" && ls build.log r*_spec.log) && rm -f "$OUT"/r*_spec.log
