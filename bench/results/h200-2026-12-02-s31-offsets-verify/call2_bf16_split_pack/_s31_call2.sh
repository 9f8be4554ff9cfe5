#!/usr/bin/env bash
# Session 31, call 2. ab_base = main 8ceb7ab + gdn-issue-offsets.patch; tree = that + bf16-split-pack.patch.
# 1. bf16-split-pack's A/B and gate comparison (scripts/_bf16_split_pack.sh's first half).
# 2. In the base folder (gdn-issue-offsets alone): the racecheck cases call 1 did not reach (its
#    racecheck was cut by its 330 s timeout after 33 of 41 cases, with no hazard reported).
# 3. bf16-split-pack's tests and sanitizers, with what is left of the call's time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
BUILD_TIMEOUT=300 BENCH_TIMEOUT=100 bash scripts/ab_bench.sh --sections spec \
  --geometries nemotron3-nano-4b,nemotron3-super-120b,qwen3.5-4b,qwen3.5-122b -B 16 --accept all \
  --batches 1,64,256,512 --spec-tokens 4,8 > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -40
python3 - "$OUT" <<'PY'
import json, sys
gates = {lab: json.load(open(f"{sys.argv[1]}/ab_{lab}/bench.json"))["gates"] for lab in ("base", "tree")}
key = lambda g: (g["kernel"], g["geometry"], g["batch"], g["T"], g["accept"])
base = {key(g): g for g in gates["base"]}
fields = ("out_abs", "out_rel", "state_abs", "state_rel")
diff = [k for g in gates["tree"] if (k := key(g)) in base and any(g[f] != base[k][f] for f in fields)]
print(f"gates: {len(gates['tree'])} tree, {len(base)} base, errors differ in {len(diff)}: {diff[:6]}")
PY
echo "[$((SECONDS - t0)) s] ab"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
left=$((575 - (SECONDS - t0)))
echo "time left for tests: $left s"
SEL="(spec_long_run and (4-fp32-bf16 or 2-fp16-fp16 or 1-bf16-bf16)) or (spec_geometries and launcher) or snapshot"
(cd /tmp/replayssm_ab_base && ids=$(python3 -m pytest --collect-only -q -p no:cacheprovider tests/test_gdn_cuda.py -k "$SEL" | grep '::' | tail -n 8) &&
  echo "$ids" && timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 python3 -m pytest -q -p no:cacheprovider $ids) \
  > "$OUT/base_racecheck_rest.log" 2>&1 &
timeout $left python3 -m pytest -q -rs -n 12 tests/test_gdn_cuda.py tests/test_mamba2_cuda.py -k "spec or fold or flush" \
  > "$OUT/tests.log" 2>&1 &
for tool in memcheck racecheck; do
  timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_gdn_cuda.py tests/test_mamba2_cuda.py \
    -k "(test_gdn_cuda and spec_long_run and 4-fp32-bf16 and pairs) or (test_gdn_cuda and spec_stream_forms and registers_4ctas and 16-12-8) or (test_mamba2_cuda and spec_stream_forms and mma and launcher)" \
    > "$OUT/san_$tool.log" 2>&1 &
done
wait
tail -3 "$OUT/tests.log"
echo "base racecheck rest: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed|failed' "$OUT/base_racecheck_rest.log" | tr '\n' ' ')"
for tool in memcheck racecheck; do
  echo "$tool $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
done
echo "[$((SECONDS - t0)) s] tests and sanitizers"
