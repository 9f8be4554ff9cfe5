#!/usr/bin/env bash
# Session 31's plan for the three prepared patches in one device budget (each patch's own script
# measures it alone; this runs them together to save cold starts and builds). Here, before the
# first call:
#   scripts/ab_bench.sh --prepare HEAD        # ab_base = main (carry .whl, ab_base)
#   git apply docs/prepared/gdn-token-loads.patch docs/prepared/m2-spec-c-vec.patch \
#             docs/prepared/bf16-split-pack.patch
# Then one device call per stage, the later two on the same warm machine (they build again if it
# went cold):
#   bash docs/prepared/run_prepared.sh ab        # ~7 min cold: both full builds at once; A/B of every
#                                                # spec row of both families (T = 1 / 2 / 4 / 8, batch
#                                                # 1-512) with the gates compared (ab_bench.sh); Mamba-2 T = 8 at
#                                                # batch 1 / 8 in two more alternating process pairs
#   bash docs/prepared/run_prepared.sh tests     # ~5 min warm: every CUDA test of both families
#   bash docs/prepared/run_prepared.sh sanitize  # ~8 min warm: memcheck / racecheck of the forms the
#                                                # patches change, four processes
# Which rows isolate which patch: Mamba-2 T <= 4 (CUDA-core stream) m2-spec-c-vec only; Mamba-2
# T = 8 (tensor-core stream) bf16-split-pack only; GDN T = 1 / 2 gdn-token-loads only (its load
# order at T = 2, its lambdas' rescheduling at T = 1); GDN T = 4 / 8 gdn-token-loads and
# bf16-split-pack together (bf16-split-pack alone measured -0.6 / -0.9 % there at Qwen3.5-4B batch
# 256 in session 31). A patch whose rows lose is reverted and the other two measured again.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: run_prepared.sh ab|tests|sanitize"}
t0=$SECONDS
if [[ $stage != ab ]] && ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
  timeout 330 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] built"
fi
case $stage in
ab)
  BUILD_TIMEOUT=330 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh --sections spec \
    --geometries nemotron3-nano-4b,nemotron3-super-120b,qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
    --batches 1,8,64,256,512 --spec-tokens 1,2,4,8 > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -90
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab"
  for label in tree1 base1 base2 tree2; do
    dir=$PWD; [[ $label == base* ]] && dir=/tmp/replayssm_ab_base
    (cd "$dir" && timeout 90 python3 -m replayssm_ext.benchmark --sections spec \
      --geometries nemotron3-nano-4b,nemotron3-super-120b -B 16 --accept all --batches 1,8 --spec-tokens 8 \
      --out "$OUT/ab_small_$label") > "$OUT/ab_small_$label.log" 2>&1
  done
  python3 - "$OUT" <<'PY'
import json, sys
rows = {}
for lab in ("tree1", "base1", "base2", "tree2"):
    for r in json.load(open(f"{sys.argv[1]}/ab_small_{lab}/bench.json"))["rows"]:
        if r["kernel"] == "m2_spec_cycle":
            rows.setdefault((r["geometry"], r["batch"]), {})[lab] = r["us"]
for (geo, batch), v in sorted(rows.items()):
    print(f"m2_spec_cycle {geo} batch {batch} T 8: " + " ".join(f"{k} {u:.2f}" for k, u in v.items()))
PY
  echo "[$((SECONDS - t0)) s] small batches"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log
  ;;
tests)
  timeout 500 python3 -m pytest -q -rs -n 14 tests/test_gdn_cuda.py tests/test_gdn_ops.py tests/test_mamba2_cuda.py \
    tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  ;;
sanitize)
  GDN="(spec_long_run and (4-fp32-bf16 or 2-fp16-fp16 or 1-bf16-bf16)) or (spec_stream_forms and 16-12-8)"
  M2="spec_full_windows or spec_c_views or (spec_stream_forms and mma and launcher)"
  run_tool() {  # tool, label, test file, -k expression
    timeout 500 compute-sanitizer --tool "$1" --error-exitcode 3 python3 -m pytest -q -p no:cacheprovider "$3" -k "$4" \
      > "$OUT/san_$2.log" 2>&1
  }
  run_tool memcheck memcheck_gdn tests/test_gdn_cuda.py "$GDN" &
  run_tool memcheck memcheck_m2 tests/test_mamba2_cuda.py "$M2" &
  run_tool racecheck racecheck_gdn tests/test_gdn_cuda.py "$GDN" &
  run_tool racecheck racecheck_m2 tests/test_mamba2_cuda.py "$M2" &
  wait
  for f in "$OUT"/san_*.log; do
    echo "$(basename "$f" .log): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$f" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" $(cd "$OUT" && ls san_*.log) && rm "$OUT"/san_*.log
  ;;
*) echo "unknown stage $stage (ab, tests, sanitize)" >&2; exit 2 ;;
esac
