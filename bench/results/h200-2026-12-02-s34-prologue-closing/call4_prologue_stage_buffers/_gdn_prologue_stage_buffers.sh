#!/usr/bin/env bash
# Session 34 (delete before merging, keep with the results): session 33's prepared prologue loads
# (the GDN window kernel's token range beside its slot, the slot's cursors right after it, as
# relaxed loads at GPU scope that ptxas leaves ahead of the early-exit checks), now in the
# stage-buffer instances only. As first measured (this session's call 1, every instance) the
# register stream's T = 8 rows at batch 256 / 512 lost 2.3-2.7 % (its spills grew) while batch
# 1-8 gained up to 4 %; the register-stream instances now read as main does.
# Two stages, one device call each (the second needs the first's build, kept while the machine
# stays warm; it builds again otherwise):
#   scripts/ab_bench.sh --prepare <main's commit>   # here, before the first call (carry .whl, ab_base)
#   bash scripts/_gdn_prologue_stage_buffers.sh ab      # ~3 min warm, ~5 cold: GDN-only builds; A/B of every
#                                               # GDN spec row (verify and per-draft snapshots), T = 1 /
#                                               # 2 / 4 / 8, batch 1-512, both geometries; bf16
#                                               # checkpoint T = 2 / 4 / 8 at batch 64 / 256; gates compared
#   bash scripts/_gdn_prologue_stage_buffers.sh check   # ~7 min warm: every GDN GPU test, then memcheck and
#                                               # racecheck of the spec long runs (padding, random
#                                               # windows, mixed phases) at T = 1 / 2 / 4 / 8 and the
#                                               # T = 8 register stream
# Merge if the gates' errors are identical, every test passes, the sanitizers are clean and the
# rows gain beyond the spread with none losing (T = 8's register stream and batch 1 most of all).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 REPLAYSSM_FAMILIES=gdn
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
stage=${1:?"usage: _gdn_prologue_stage_buffers.sh ab|check"}
t0=$SECONDS
case $stage in
ab)
  BUILD_TIMEOUT=240 BENCH_TIMEOUT=150 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b,qwen3.5-122b \
    -B 16 --accept all --batches 1,8,64,256,512 --spec-tokens 1,2,4,8 > "$OUT/ab.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=|built' "$OUT/ab.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}' | head -50
  grep '^gates:' "$OUT/ab.txt"
  echo "[$((SECONDS - t0)) s] ab fp32"
  AB_KEEP_BASE=1 OUT="$OUT/bf16" BENCH_TIMEOUT=120 bash scripts/ab_bench.sh --sections spec --geometries qwen3.5-4b \
    -B 16 --accept all --batches 64,256 --spec-tokens 2,4,8 --state-dtype bf16 > "$OUT/ab_bf16.txt" 2>&1
  grep -E 'spec_cycle|FAILED|rc=' "$OUT/ab_bf16.txt" | awk '{print $1,$2,$3,$5,$(NF-2),$(NF-1),$NF}'
  grep '^gates:' "$OUT/ab_bf16.txt"
  echo "[$((SECONDS - t0)) s] ab bf16"
  tar czf "$OUT/ab.tgz" -C "$OUT" $(cd "$OUT" && ls -d ab_* bf16 | grep -v '\.txt$') && rm -rf "$OUT"/ab_*/ "$OUT"/ab_*.log "$OUT/bf16"
  ;;
check)
  if ! ls replayssm_ext/_C*.so > /dev/null 2>&1; then
    timeout 240 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    echo "[$((SECONDS - t0)) s] built"
  fi
  timeout 240 python3 -m pytest -q -rs -n 14 tests/test_gdn_cuda.py tests/test_gdn_ops.py > "$OUT/tests.log" 2>&1
  tail -3 "$OUT/tests.log"
  echo "[$((SECONDS - t0)) s] tests"
  left=$((560 - (SECONDS - t0)))
  # The spec long runs (padded rows, random windows, mixed phases) through every prologue form:
  # the pairs at T = 4 / 2, one head at T = 1 and 8, and the T = 8 register stream.
  SEL="(spec_long_run and ((pairs and (4-fp32-bf16 or 2-bf16-bf16)) or (launcher and (1-bf16-bf16 or 8-fp32-fp32)))) or (spec_stream_forms and registers_4ctas and 16-12-8)"
  for tool in memcheck racecheck; do
    timeout $left compute-sanitizer --tool $tool --error-exitcode 3 python3 -m pytest -v -p no:cacheprovider \
      tests/test_gdn_cuda.py -k "$SEL" > "$OUT/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck; do
    echo "$tool $(grep -cE 'PASSED' "$OUT/san_$tool.log") passed; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ')"
  done
  echo "[$((SECONDS - t0)) s] sanitizers"
  tar czf "$OUT/san.tgz" -C "$OUT" san_memcheck.log san_racecheck.log && rm "$OUT"/san_*.log
  ;;
*) echo "unknown stage $stage (ab, check)" >&2; exit 2 ;;
esac
