#!/usr/bin/env bash
# Session 30 (keep with the results): the GDN window kernel's stage-chunk copies with per-thread
# piece offsets set up once per CTA instead of 64-bit address arithmetic per chunk (issue_chunk).
# A/B against main (GDN-only builds at once), then as many GDN spec tests as the call has time for.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
t0=$SECONDS
BUILD_TIMEOUT=200 BENCH_TIMEOUT=60 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b -B 16 \
  --accept all --batches 8,64,256,512 --spec-tokens 2,4 > "$OUT/ab.txt" 2>&1
grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -30
echo "[$((SECONDS - t0)) s] ab"
tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_*) && rm -rf "$OUT"/ab_*
timeout 75 python3 -m pytest -q -rs -n 16 tests/test_gdn_cuda.py tests/test_gdn_ops.py -k "spec or snapshot" > "$OUT/tests.log" 2>&1
tail -3 "$OUT/tests.log"
echo "[$((SECONDS - t0)) s] tests"
