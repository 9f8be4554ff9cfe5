"""The benchmark harness end to end on the CPU at a tiny size: its correctness gates (which compare
the replay ops against the classic step over whole flush cycles with the cursors advanced by the
real commit op) must pass and it must write its JSON and table. GPU timing is not checked here."""

import json

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


def test_plan_section_runs_alone_without_a_device(tmp_path):
    # --device defaults to cuda; a plan-only run needs no device (none here or on any CPU host).
    assert benchmark.main(["--sections", "plan", "--plan-memory-gib", "40", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    assert not report["rows"] and report["plan"]
    nano_t4 = [p for p in report["plan"] if p["geometry_name"] == "nemotron3-nano-4b" and p["max_tokens"] == 4]
    assert nano_t4[0]["memory_bytes"] == 40 * 2**30


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
