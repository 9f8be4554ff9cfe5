"""The benchmark harness end to end on the CPU at a tiny size: its correctness gates (which compare
the replay ops against the classic step over whole flush cycles with the cursors advanced by the
real commit op) must pass and it must write its JSON and table. GPU timing is not checked here."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from replayssm_ext import benchmark, cursor_rules


def test_benchmark_tiny_cpu_runs_and_passes_its_gates(tmp_path):
    argv = ["--device", "cpu", "--tiny", "--sections", "m2,gdn,spec,plan", "--out", str(tmp_path)]
    assert benchmark.main(argv) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    kernels = {r["kernel"] for r in report["rows"]}
    assert {"m2_base", "m2_oo_cycle", "m2_so_cycle", "gdn_base", "gdn_cycle"} <= kernels
    assert report["gates"] and all(g["passed"] and not g["problems"] for g in report["gates"])
    assert not report["errors"]

    # Spec section: both families, replay and snapshot baseline at every (batch, T, accept) the
    # tiny grid has (T = 1, 2; mean2.5 only at T > 1), each replay row gated first.
    spec = [r for r in report["rows"] if r["section"] == "spec" and r["kernel"] != "commit"]
    want = {(k, b, T, m) for k in ("m2_spec_cycle", "m2_spec_base", "gdn_spec_cycle", "gdn_spec_base")
            for b in (1, 3) for T, m in ((1, "all"), (2, "all"), (2, "mean2.5"))}
    assert {(r["kernel"], r["batch"], r["T"], r["accept"]) for r in spec} == want
    spec_gates = {(g["kernel"], g["T"], g["accept"]) for g in report["gates"] if g["check"] == "spec"}
    assert {(k, T, m) for k, _, T, m in want if k.endswith("_cycle")} == spec_gates
    batch_gates = {(g["kernel"], g["batch"], g["T"], g["accept"]) for g in report["gates"]
                   if g["check"] == "batch" and "T" in g}
    assert batch_gates == {w for w in want if w[0].endswith("_cycle") and w[1] == 3}
    for r in spec:
        assert r["steps"] >= 1 and r["bytes"] > 0
        assert r["us_per_token"] == pytest.approx(r["us"] / r["tokens_per_step"])
        if r["accept"] == "all":
            assert r["tokens_per_step"] == r["T"]
        if r["kernel"].endswith("_cycle"):
            assert r["base_us"] is not None and r["speedup_vs_base"] == pytest.approx(r["base_us"] / r["us"])
    # With every draft accepted and rows in phase, the window is one flush cycle: from hist = T to
    # the flush step, which comes once hist + 2T > B + T (B = 4 in --tiny).
    for r in spec:
        if r["accept"] == "all":
            T, B = r["T"], r["B"]
            hist, steps = T, 1
            while not cursor_rules.flush_due(hist, B, T):
                hist, steps = hist + T, steps + 1
            assert r["steps"] == steps, r

    # Plan section: every planner geometry at T = 2, 4, 8, with the planner's numbers.
    plan = report["plan"]
    assert {(p["geometry_name"], p["max_tokens"]) for p in plan} == {
        (g, T) for g in ("nemotron3-nano-4b", "nemotron3-super-120b", "qwen3.5-4b", "qwen3.5-122b") for T in (2, 4, 8)}
    for p in plan:
        assert p["replay_max_seqs"] == p["memory_bytes"] // p["replay_bytes_per_seq"]
        assert p["snapshot_max_seqs"] == p["memory_bytes"] // p["snapshot_bytes_per_seq"]
        assert p["snapshot_bytes_per_seq"] == p["max_tokens"] * p["checkpoint_bytes_per_layer"]
    text = (tmp_path / "table.txt").read_text()
    assert "m2_spec_cycle" in text and "nemotron3-nano-4b" in text


def test_spec_phases_split_the_window(tmp_path):
    """--spec-phases: with every draft accepted (rows in phase) each spec replay row also comes as
    the window's non-flush steps and its flush step. Their step counts add up to the window's, and
    the window's bytes are their step-weighted mean (bytes are counted, not timed)."""
    argv = ["--device", "cpu", "--tiny", "--sections", "spec", "--accept", "all", "--spec-phases",
            "--out", str(tmp_path)]
    assert benchmark.main(argv) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    assert not report["errors"]
    rows = {(r["kernel"], r["geometry"], r["batch"], r["T"]): r for r in report["rows"]
            if r["section"] == "spec" and r["kernel"] != "commit"}
    cycles = [k for k in rows if k[0].endswith("_spec_cycle")]
    assert {k[0] for k in cycles} == {"m2_spec_cycle", "gdn_spec_cycle"}
    for k in cycles:
        family = k[0][: -len("_cycle")]
        cycle, nonflush, flush = rows[k], rows[(family + "_nonflush",) + k[1:]], rows[(family + "_flush",) + k[1:]]
        assert nonflush["steps"] >= 1 and flush["steps"] >= 1
        assert nonflush["steps"] + flush["steps"] == cycle["steps"]
        assert nonflush["flush_rows_per_step"] == 0.0 and flush["flush_rows_per_step"] == 1.0
        assert cycle["flush_rows_per_step"] == pytest.approx(flush["steps"] / cycle["steps"])
        weighted = (nonflush["bytes"] * nonflush["steps"] + flush["bytes"] * flush["steps"]) / cycle["steps"]
        assert cycle["bytes"] == pytest.approx(weighted, rel=1e-12)
        assert flush["bytes"] > nonflush["bytes"]  # the flush step writes the checkpoint
        for r in (nonflush, flush):
            assert r["us"] > 0 and r["tokens_per_step"] == r["T"] and r["base_us"] == cycle["base_us"]


def test_spec_phase_steps():
    ids = np.array([0, 2])  # the rows looked at; slot 1's flag does not count
    flushes = [np.array([0, 1, 0]), np.array([1, 0, 1]), np.array([0, 0, 0])]
    assert benchmark.spec_phase_steps(flushes, ids) == ([0, 2], [1])
    # A step where one of the rows flushes and the other does not: no split.
    assert benchmark.spec_phase_steps(flushes + [np.array([1, 0, 0])], ids) is None
    # A window without a flush step: no split.
    assert benchmark.spec_phase_steps([flushes[0], flushes[2]], ids) is None


def test_plan_section_runs_alone_without_a_device(tmp_path):
    # --device defaults to cuda; a plan-only run needs no device (none here or on any CPU host).
    assert benchmark.main(["--sections", "plan", "--plan-memory-gib", "40", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    assert not report["rows"] and report["plan"]
    nano_t4 = [p for p in report["plan"] if p["geometry_name"] == "nemotron3-nano-4b" and p["max_tokens"] == 4]
    assert nano_t4[0]["memory_bytes"] == 40 * 2**30


def test_sms_partition_is_refused_without_a_timed_device_section(capsys):
    # --sms confines timed kernels to an SM partition (a CUDA green context): on the CPU, or for
    # the planner alone, there is nothing to confine, and the run says so instead of ignoring it.
    assert benchmark.main(["--device", "cpu", "--tiny", "--sections", "m2", "--sms", "96"]) == 2
    assert "--sms needs --device cuda" in capsys.readouterr().err
    assert benchmark.main(["--sections", "plan", "--sms", "96"]) == 2


@pytest.mark.parametrize("T", [1, 2, 4, 8])
def test_accept_distributions(T):
    p_all = benchmark.accept_distribution("all", T)
    assert p_all[-1] == 1.0 and p_all.sum() == 1.0
    p = benchmark.accept_distribution("mean2.5", T)
    assert p.sum() == pytest.approx(1.0) and (p >= 0).all()
    mean = float((np.arange(1, T + 1) * p).sum())
    if T == 4:
        assert mean == pytest.approx(2.5, abs=1e-9)
    draws = benchmark.draw_accepted("mean2.5", T, 4000, 5, [0, T])
    assert draws.min() >= 1 and draws.max() <= T
    assert np.array_equal(draws, benchmark.draw_accepted("mean2.5", T, 4000, 5, [0, T]))  # seeded
    assert abs(draws.mean() - mean) < 0.05 * T


def test_snapshot_slot_rotation():
    seq = torch.tensor([2, -1, 0], dtype=torch.int32)
    prev = torch.tensor([3, 1, 1], dtype=torch.int32)
    assert benchmark.snapshot_read_slots(seq, prev, 4).tolist() == [10, -1, 0]
    assert benchmark.snapshot_write_slots(seq, 4).tolist() == [[8, 9, 10, 11], [-1, -1, -1, -1], [0, 1, 2, 3]]


def test_spec_bytes_formulas():
    g = benchmark.MAMBA2_GEOMETRIES[0]
    S, e = benchmark.mamba2_state_bytes(g, 4), benchmark.mamba2_ring_entry_bytes(g, 2)
    io = benchmark.mamba2_token_io_bytes(g, 2, False)
    params = benchmark.mamba2_param_bytes(g)
    # Two rows, hist 5 (no flush) and 16 (flush), 4 tokens each.
    got = benchmark.mamba2_spec_verify_bytes(g, np.array([5, 16]), np.array([0, 1]), 4, 4, 2, False)
    assert got == 3 * S + 21 * e + 2 * 4 * e + 2 * (4 * io + 4 + 9) + 3 * 4 + params
    base = benchmark.mamba2_spec_snapshot_bytes(g, 2, 4, 4, 4, 2, False)
    assert base == 2 * (5 * S + 4 * io + 4 + 16) + 3 * 4 + params


def _load_hotspots():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parent.parent / "bench" / "ncu_hotspots.py"
    spec = importlib.util.spec_from_file_location("ncu_hotspots", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ncu_hotspots_ranks_windows_by_stall_samples(tmp_path, capsys):
    """bench/ncu_hotspots.py on a hand-made source-page export: 6 instructions in windows of 2; the
    middle window holds 70 of the 100 samples, mostly short-scoreboard stalls."""
    hs = _load_hotspots()
    header = ["Address", "Source", hs.SAMPLES, "# Samples", hs.EXECUTED, "stall_short_sb", "stall_wait",
              "stall_short_sb (Not Issued)"]
    rows = [("0x0", "LDC R1", 5, 10, 1), ("0x10", "MOV R2", 5, 10, 1), ("0x20", "LDS.128 R4", 40, 60, 30),
            ("0x30", "FFMA R8", 30, 60, 20), ("0x40", "SHFL.BFLY", 10, 40, 5), ("0x50", "EXIT", 10, 20, 1)]
    path = tmp_path / "rep.csv"
    with open(path, "w") as f:
        f.write('"Kernel Name","void k(int)",\n')
        f.write(",".join(f'"{h}"' for h in header) + "\n")
        for addr, src, samples, executed, short_sb in rows:
            f.write(f'"{addr}","  {src}","{samples}","{samples}","{executed}","{short_sb}","{samples - short_sb}","0"\n')
    kernel, hdr, parsed = hs.read_source_page(str(path))
    assert kernel == "void k(int)" and len(parsed) == 6
    windows = hs.hot_windows(hdr, parsed, 2)
    assert [w["start"] for w in windows] == [2, 4, 0]
    assert windows[0]["samples"] == pytest.approx(0.70)
    assert windows[0]["executed"] == pytest.approx(120 / 200)
    assert windows[0]["reasons"][0] == ("short_sb", pytest.approx(50 / 70))
    assert hs.main([str(path), "--window", "2", "--top", "1", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "[    2,     4)  samples  70.0%" in out and "LDS.128 R4" in out


def test_ncu_hotspots_rejects_a_file_without_the_sampling_columns(tmp_path, capsys):
    hs = _load_hotspots()
    path = tmp_path / "details.csv"
    path.write_text('"Kernel Name","void k(int)",\n"Address","Source"\n"0x0","EXIT"\n')
    assert hs.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "Warp Stall Sampling (All Samples)" in err and "Instructions Executed" in err


# The seed's anchor file (../shared/anchors next to the repository, as the project's docs place it);
# REPLAYSSM_ANCHORS names another copy.
ANCHOR_FILE = Path(os.environ.get("REPLAYSSM_ANCHORS",
                                  Path(__file__).resolve().parents[2] / "shared" / "anchors" / "h200-seed-triton.json"))


@pytest.mark.skipif(not ANCHOR_FILE.is_file(), reason=f"no anchor file at {ANCHOR_FILE}")
def test_seed_anchor_tables_match_the_anchor_file():
    """Every seed time the harness prints ("seed us", "x seed") is the anchor file's, rounded to
    0.1 us: decode rows keyed by (batch, B = the seed's L), spec rows by (batch, T)."""
    rows = json.loads(ANCHOR_FILE.read_text())["rows"]
    anchor = {(r["kernel"], r["geometry"], r["batch"], r["L"], r["T"]): r["us"] for r in rows}
    names = benchmark.SEED_ANCHOR_KERNELS
    checked = 0
    for (kernel, geometry), table in benchmark.SEED_ANCHOR_US.items():
        for (batch, B), us in table.items():
            assert us == round(anchor[(names.get(kernel, kernel), geometry, batch, B, None)], 1), \
                (kernel, geometry, batch, B)
            checked += 1
    for (kernel, geometry), table in benchmark.SEED_SPEC_ANCHOR_US.items():
        for (batch, T), us in table.items():
            assert us == round(anchor[(names.get(kernel, kernel), geometry, batch, None, T)], 1), \
                (kernel, geometry, batch, T)
            checked += 1
    assert checked == 232 + 112
