#!/usr/bin/env bash
# Session 21 (kept with its results once run): the output-only decode's non-flush rows stream their
# state before their entries' terms (the kStreamFirst instances, fp32 checkpoints;
# REPLAYSSM_M2_DECODE_STREAM_FIRST). The spec-verify half of session 20's prepared patch was
# dropped after its first A/B (slower, and non-finite outputs on nano T = 4).
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call
#   bash scripts/_m2_stream_first.sh ab       # main vs the tree (decode, both routes, batch 1-512),
#                                             # then each order forced 0 / 1 in the tree's build
#   bash scripts/_m2_stream_first.sh tests    # same machine, warm: Mamba-2 tests, sanitizers
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=mamba2
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
GEOS=(--geometries nemotron3-nano-4b,nemotron3-super-120b -B 16)
rows() { grep -E '\] m2_(oo|so)_' "$1" | awk '{printf "%s/%s/%s %s | ", $3, $4, $5, $7}'; }
if [[ ${1:-} == ab ]]; then
  BUILD_TIMEOUT=220 BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections m2 "${GEOS[@]}" --batches 1,64,256,512 \
    --routes output_only,state_and_output > "$OUT/ab.txt" 2>&1
  grep -E 'm2_(oo|so)_|FAILED|rc=' "$OUT/ab.txt" | head -80
  echo "[$((SECONDS - t0)) s] ab"
  for round in 0 1; do
    for order in 1 0; do
      name=r${round}_dec$order
      REPLAYSSM_M2_DECODE_STREAM_FIRST=$order timeout 90 python3 -m replayssm_ext.benchmark --sections m2 "${GEOS[@]}" \
        --batches 1,64,256,512 --routes output_only --out "$OUT/$name" > "$OUT/$name.log" 2>&1
      echo "$name: $(rows "$OUT/$name.log")"
      rm -rf "$OUT/$name"
    done
  done
  echo "[$((SECONDS - t0)) s] orders"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* r*_dec*.log) && rm -rf "$OUT"/ab_* "$OUT"/r*_dec*.log
elif [[ ${1:-} == tests ]]; then
  # the tree's csrc/ after the ab call plus the launcher rule: rebuild, then the rule's choice per
  # batch (the launcher's default next to each order forced), then the tests.
  timeout 200 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "[$((SECONDS - t0)) s] built"
  if [[ -z ${SKIP_RULE:-} ]]; then  # SKIP_RULE=1: tests and sanitizers only
    for order in default 1 0; do
      if [[ $order == default ]]; then unset REPLAYSSM_M2_DECODE_STREAM_FIRST; else export REPLAYSSM_M2_DECODE_STREAM_FIRST=$order; fi
      timeout 90 python3 -m replayssm_ext.benchmark --sections m2 "${GEOS[@]}" --batches 1,4,8,12,16,64 \
        --routes output_only --out "$OUT/rule_$order" > "$OUT/rule_$order.log" 2>&1
      echo "rule_$order: $(grep -E '\] m2_oo_nonflush' "$OUT/rule_$order.log" | awk '{printf "%s/%s %s | ", $4, $5, $7}')"
      rm -rf "$OUT/rule_$order"
    done
    unset REPLAYSSM_M2_DECODE_STREAM_FIRST
  fi
  echo "[$((SECONDS - t0)) s] rule"
  timeout 240 python3 -m pytest -q -n 16 ${TESTS_K:+-k "$TESTS_K"} tests/test_mamba2_cuda.py tests/test_mamba2_ops.py > "$OUT/tests.log" 2>&1
  tail -2 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -q -x -p no:cacheprovider \
      tests/test_mamba2_cuda.py -k "(decode_stream_order_forms and (odd or wide)) or decode_stream_orders_bit_identical" \
      > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/tests.tgz" -C "$OUT" $(cd "$OUT" && ls build.log rule_*.log tests.log san_*.log) && rm -f "$OUT"/*.log
else
  echo "usage: bash scripts/_m2_stream_first.sh ab|tests" >&2; exit 2
fi
