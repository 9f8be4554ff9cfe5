"""Gated DeltaNet replay ops (decode, spec verify, flush) and the baseline state update, against the
fp64 sequential recurrence on each sequence's accepted token stream (tests/helpers.py): outputs,
the checkpoint at flushes, the ring entries u / k̂ / g (values to the flash-attention rule, slots
exactly), untouched bytes and cursors exactly."""

import pytest
import torch

from replayssm_ext import reference

from conftest import cuda_only
from helpers import (PRECISIONS, GDN, GDNGeo, Recurrence, Sim, SimConfig, run_checked, run_state_update,
                     steps_for_cycles)

# The CUDA GDN kernels need K = V in {64, 128, 256} and 16-byte aligned rows; the geometries here are
# sized for the CPU reference, so their CUDA coverage lives in tests/test_gdn_cuda.py (same harness,
# kernel-sized geometries, aligned pages) rather than in a cuda variant of these tests.
CPU_ONLY = [pytest.param("cpu", id="cpu")]
SMALL = GDNGeo(H=2, HV=4, K=16, V=16)        # grouped: 2 v-heads per k-head
SPEC_OPS = ("gdn_spec_verify", "gdn_flush", "commit", "reset")
DECODE_OPS = ("gdn_decode", "gdn_flush", "commit", "reset")

BT_PAIRS = [(1, 1), (4, 1), (4, 2), (4, 4), (16, 1), (16, 2), (16, 4), (16, 8)]


# --- the two independent ground truths agree ------------------------------------------------

@pytest.mark.parametrize("use_dt_bias,qk_l2norm", [(True, True), (False, False)])
def test_truth_matches_reference_recurrence(use_dt_bias, qk_l2norm):
    """helpers' fp64 recurrence and replayssm_ext.reference.gdn_recurrence, written independently,
    agree to fp64 rounding."""
    g = torch.Generator().manual_seed(2)
    fam = GDN(GDNGeo(H=2, HV=6, K=8, V=4), use_dt_bias=use_dt_bias, qk_l2norm=qk_l2norm, scale=0.6)
    layer = fam.make_layer(g)
    toks = fam.make_tokens(g, (1, 30), torch.float32)
    S0 = fam.random_state(g, (1,), torch.float32)
    y, states, _ = Recurrence(fam, layer, S0, truth=True, state_dtype=torch.float32, act=torch.float32).run(toks, 30)
    t = {k: v[0] for k, v in toks.items()}
    y_ref, _, st_ref = reference.gdn_recurrence(t["q"], t["k"], t["v"], t["a"], t["b"], layer["A_log"],
                                                layer["dt_bias"], fam.scale, qk_l2norm, state=S0[0],
                                                return_states=True)
    torch.testing.assert_close(y[0], y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(states[:, 0], st_ref, rtol=1e-12, atol=1e-12)


# --- long runs --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("T,state,act", [(4, "fp32", "bf16"), (8, "fp32", "fp32"), (2, "fp16", "fp16")])
def test_spec_long_run(device, T, state, act):
    cfg = SimConfig(mode="spec", Bcap=16, T=T, ring_extra=2, rows=16, spare_slots=3, steps=200, state=state,
                    act=act, paged=True, null_slot=0, pad_prob=0.1, reset_prob=0.01, fold_prob=0.03,
                    device=device, seed=T)
    stats = run_checked(GDN(SMALL), cfg, min_flushes=5)
    assert stats.folds > 0 and stats.pad_rows > 0 and stats.mixed_phase_steps > 0


@pytest.mark.parametrize("device", CPU_ONLY)
def test_decode_long_run(device):
    cfg = SimConfig(mode="decode", Bcap=16, T=1, rows=16, steps=200, state="fp32", act="bf16", paged=True,
                    null_slot=1, pad_prob=0.1, reset_prob=0.01, fold_prob=0.03, device=device, seed=12)
    stats = run_checked(GDN(SMALL), cfg, min_flushes=5)
    assert stats.folds > 0 and stats.pad_rows > 0 and stats.mixed_phase_steps > 0


# --- sweeps -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("state,act", PRECISIONS)
@pytest.mark.parametrize("Bcap,T", BT_PAIRS)
def test_spec_sweep(device, Bcap, T, state, act):
    i = BT_PAIRS.index((Bcap, T)) + PRECISIONS.index((state, act))
    cfg = SimConfig(mode="spec", Bcap=Bcap, T=T, ring_extra=i % 3, rows=4, spare_slots=2,
                    steps=steps_for_cycles(Bcap, T, 4), state=state, act=act, paged=bool(i % 2),
                    null_slot=(3 if i % 2 else None), reset_prob=0.0, device=device, seed=100 + i)
    run_checked(GDN(SMALL), cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("state,act", PRECISIONS)
@pytest.mark.parametrize("Bcap", [1, 4, 16])
def test_decode_sweep(device, Bcap, state, act):
    i = [1, 4, 16].index(Bcap) + PRECISIONS.index((state, act))
    cfg = SimConfig(mode="decode", Bcap=Bcap, T=1, ring_extra=i % 2, rows=4, spare_slots=2,
                    steps=steps_for_cycles(Bcap, 1, 4), state=state, act=act, paged=bool(i % 2),
                    null_slot=(0 if i % 2 else None), reset_prob=0.0, device=device, seed=200 + i)
    run_checked(GDN(SMALL), cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("geo", [GDNGeo(H=4, HV=4, K=8, V=16), GDNGeo(H=1, HV=4, K=16, V=8),
                                 GDNGeo(H=2, HV=6, K=16, V=16)], ids=["HV=H", "HV=4H", "HV=3H"])
@pytest.mark.parametrize("use_dt_bias,qk_l2norm", [(True, True), (False, True), (True, False)])
def test_spec_heads_and_options(device, geo, use_dt_bias, qk_l2norm):
    fam = GDN(geo, use_dt_bias=use_dt_bias, qk_l2norm=qk_l2norm)
    cfg = SimConfig(mode="spec", Bcap=8, T=2, rows=3, steps=steps_for_cycles(8, 2, 3), reset_prob=0.0,
                    state="fp32", act="bf16", paged=True, device=device, seed=300)
    run_checked(fam, cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("mode,T", [("spec", 2), ("decode", 1)])
def test_long_history_fp32(device, mode, T):
    """fp32 throughout, B = 16: the log decay summed over a full history is about -16 (g about -1
    per token), the regime where a fold's precision shows."""
    cfg = SimConfig(mode=mode, Bcap=16, T=T, rows=4, steps=steps_for_cycles(16, T, 4), reset_prob=0.0,
                    state="fp32", act="fp32", device=device, seed=320 + T)
    run_checked(GDN(SMALL), cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("mode,T,act", [("spec", 4, "bf16"), ("decode", 1, "fp16")])
def test_strided_out(device, mode, T, act):
    """`out` one element into a wider buffer with an odd row stride: the outputs land in the view and
    nothing else in the buffer is written (the CUDA variants are in tests/test_gdn_cuda.py)."""
    cfg = SimConfig(mode=mode, Bcap=8, T=T, rows=5, steps=steps_for_cycles(8, T, 5), reset_prob=0.0, state="fp32",
                    act=act, strided_out=True, null_slot=0, device=device, seed=340 + T)
    run_checked(GDN(SMALL), cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("use_dt_bias,qk_l2norm", [(False, False), (True, True)])
def test_decode_options(device, use_dt_bias, qk_l2norm):
    fam = GDN(GDNGeo(H=2, HV=4, K=8, V=8), use_dt_bias=use_dt_bias, qk_l2norm=qk_l2norm, scale=0.7)
    cfg = SimConfig(mode="decode", Bcap=4, T=1, rows=3, steps=steps_for_cycles(4, 1, 3), reset_prob=0.0, state="fp32",
                    act="fp32", device=device, seed=301)
    run_checked(fam, cfg)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("T", [1, 4])
def test_spec_batch_16_full_windows(device, T):
    cfg = SimConfig(mode="spec", Bcap=16, T=T, rows=16, steps=steps_for_cycles(16, T, 16), varlen=False, reset_prob=0.0,
                    state="fp32", act="fp16", paged=True, device=device, seed=400 + T)
    run_checked(GDN(SMALL), cfg)


# --- teeth ------------------------------------------------------------------------------------

def _corrupt_history(sim, live, slot_ids, ring_name):
    for r, is_live in enumerate(live):
        c = sim.cursors.model[slot_ids[r]] if is_live else None
        if c is not None and not c.flush and c.hist >= 2:
            pos = (c.start + c.hist // 2) % sim.R
            sim.cache[ring_name][slot_ids[r], 0, pos] += 1.0
            return
    raise AssertionError("test setup: no live non-flush row with history to corrupt")


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("ring_name", ["ring_u", "ring_k", "ring_g"])
def test_teeth_corrupted_history_fails(device, ring_name):
    cfg = SimConfig(mode="spec", Bcap=16, T=4, rows=4, steps=4, state="fp32", act="fp32", pad_prob=0.0,
                    reset_prob=0.0, stagger=False, varlen=False, device=device, seed=500)
    sim = Sim(GDN(SMALL), cfg)
    sim.run()
    with pytest.raises(AssertionError, match="flash-attention rule failed:\n(.*\n)*outputs: "):
        sim.step(sim.stats.steps, before_op=lambda s, live, ids: _corrupt_history(s, live, ids, ring_name))
        sim.finish()


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("where", ["before", "between"])
def test_teeth_write_outside_strided_out_fails(device, where, monkeypatch):
    """The strided-out check catches a store next to the view: one element just before the first
    output row, or in the gap after the first row."""
    fam = GDN(SMALL)
    spec_verify = fam.spec_verify

    def stray_store(tok, layer, cu, slots, cur, cache, out, T, null_slot):
        spec_verify(tok, layer, cu, slots, cur, cache, out, T, null_slot)
        at = out.storage_offset() + (-1 if where == "before" else out[0].numel())
        out.as_strided((1,), (1,), at).fill_(0.5)

    monkeypatch.setattr(fam, "spec_verify", stray_store)
    cfg = SimConfig(mode="spec", Bcap=8, T=2, rows=3, steps=3, state="fp32", act="bf16", pad_prob=0.0,
                    reset_prob=0.0, stagger=False, strided_out=True, device=device, seed=502)
    with pytest.raises(AssertionError, match="outside the out view"):
        Sim(fam, cfg).run()


@pytest.mark.parametrize("device", CPU_ONLY)
def test_teeth_decode_corrupted_history_fails(device):
    cfg = SimConfig(mode="decode", Bcap=16, T=1, rows=4, steps=5, state="fp32", act="bf16", pad_prob=0.0,
                    reset_prob=0.0, stagger=False, device=device, seed=501)
    sim = Sim(GDN(SMALL), cfg)
    sim.run()
    with pytest.raises(AssertionError, match="flash-attention rule failed:\n(.*\n)*outputs: "):
        sim.step(sim.stats.steps, before_op=lambda s, live, ids: _corrupt_history(s, live, ids, "ring_u"))
        sim.finish()


# --- the baseline: gdn_state_update -----------------------------------------------------------

@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("state,act", PRECISIONS)
def test_state_update_plain(device, state, act):
    run_state_update(GDN(SMALL), device, state, act, rows=5, steps=12, seed=600, null_slot=0)


@pytest.mark.parametrize("device", CPU_ONLY)
@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("state,act", [("fp32", "fp32"), ("fp32", "bf16"), ("bf16", "bf16")])
def test_state_update_spec_snapshots(device, T, state, act):
    run_state_update(GDN(SMALL), device, state, act, rows=4, steps=10, T=T, seed=610 + T)


# --- large: real geometries, CUDA only --------------------------------------------------------

REAL = {"qwen4b": GDNGeo(16, 32, 128, 128), "qwen122b": GDNGeo(16, 64, 128, 128)}


@pytest.mark.large
@pytest.mark.parametrize("device", cuda_only(*SPEC_OPS, *DECODE_OPS))
@pytest.mark.parametrize("geo", list(REAL))
@pytest.mark.parametrize("mode,T", [("decode", 1), ("spec", 4)])
@pytest.mark.parametrize("state,act", [("fp32", "bf16")])
def test_real_geometry(device, geo, mode, T, state, act):
    # The fp64 truth of a real geometry runs on the host: a few rows keep a run within a minute.
    # Unpaged: helpers' paged views sit at odd offsets, which the CUDA kernels reject (they need
    # 16-byte aligned rows); test_gdn_cuda.py runs these geometries on aligned pages.
    cfg = SimConfig(mode=mode, Bcap=16, T=T, rows=4, steps=steps_for_cycles(16, T, 4), reset_prob=0.0,
                    state=state, act=act, paged=False, null_slot=0, fold_prob=0.05, device=device, seed=700)
    run_checked(GDN(REAL[geo]), cfg)
