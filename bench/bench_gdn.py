#!/usr/bin/env python
"""Gated DeltaNet plain decode: the classic step against ReplaySSM decode.

Runs ``replayssm_ext.benchmark`` with ``--sections gdn``; every other option passes through
(``--help`` lists them, bench/README.md explains them). From the repository root:

    python bench/bench_gdn.py --quick --out bench_out
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root holds the package

from replayssm_ext.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--sections", "gdn"] + sys.argv[1:]))
