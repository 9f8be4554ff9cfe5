#!/usr/bin/env python
"""Speculative decoding: ReplaySSM spec verify against the classic step with per-draft state
snapshots (Mamba-2 and GDN), plus the planner's concurrency table.

Runs ``replayssm_ext.benchmark`` with ``--sections spec,plan``; every other option passes through
(``--help`` lists them, bench/README.md explains them). From the repository root:

    python bench/bench_spec.py --batches 1,256 --spec-tokens 4 --out bench_spec_out
    python bench/bench_spec.py --device cpu --tiny          # smoke test on the CPU reference ops
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root holds the package

from replayssm_ext.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--sections", "spec,plan"] + sys.argv[1:]))
