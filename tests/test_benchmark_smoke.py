"""The benchmark harness end to end on the CPU at a tiny size: its correctness gates (which compare
the replay ops against the classic step over whole flush cycles with the cursors advanced by the
real commit op) must pass and it must write its JSON and table. GPU timing is not checked here."""

import json

from replayssm_ext import benchmark


def test_benchmark_tiny_cpu_runs_and_passes_its_gates(tmp_path):
    assert benchmark.main(["--device", "cpu", "--tiny", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    kernels = {r["kernel"] for r in report["rows"]}
    assert {"m2_base", "m2_oo_cycle", "m2_so_cycle", "gdn_base", "gdn_cycle"} <= kernels
    assert report["gates"] and all(g["passed"] and not g["problems"] for g in report["gates"])
    assert not report["errors"]
