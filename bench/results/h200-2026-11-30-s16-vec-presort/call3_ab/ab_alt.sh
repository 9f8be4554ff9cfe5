#!/usr/bin/env bash
# Session 15, temporary: in-run comparison of several csrc/ trees. Each ab_vars/<label>/csrc and the
# working tree's csrc ("tree") is built once (the .so kept aside), then the benchmark runs ROUNDS
# times over all of them in turn, the .so swapped in place between processes.
#   [SKIP_BUILD=1] [TAG=prefix_] scripts/_ab_alt.sh ROUNDS BENCH_SCRIPT ARGS...
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"; W=/tmp/abalt; mkdir -p $W/logs
export TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
rounds=$1; shift
t0=$SECONDS
restore() { if [[ -d ab_tree_csrc ]]; then rm -rf csrc && mv ab_tree_csrc csrc; fi; }
trap restore EXIT
build() {  # label
  find csrc -type f -exec touch {} +
  timeout 300 python3 setup.py build_ext --inplace > $W/build_$1.log 2>&1 || { tail -30 $W/build_$1.log; exit 1; }
  mkdir -p $W/so_$1 && cp replayssm_ext/*.so $W/so_$1/
  echo "[$((SECONDS - t0)) s] built $1"
}
labels=()
for d in ab_vars/*/; do
  l=$(basename $d); labels+=($l)
  [[ ${SKIP_BUILD:-0} == 1 ]] || { mv csrc ab_tree_csrc && cp -r $d/csrc csrc && build $l; restore; }
done
labels+=(tree); [[ ${SKIP_BUILD:-0} == 1 ]] || build tree
for r in $(seq 1 $rounds); do
  for v in "${labels[@]}"; do
    cp $W/so_$v/*.so replayssm_ext/
    timeout 120 python3 "$@" > $W/logs/${TAG:-}${v}_$r.log 2>&1 || echo "bench $v $r rc=$?"
  done
  echo "[$((SECONDS - t0)) s] round $r"
done
cp $W/so_tree/*.so replayssm_ext/
tar czf $OUT/ab_logs.tgz -C $W logs $(cd $W && ls build_*.log)
