"""The Mamba-2 CUDA kernels (mamba2_decode both routes, mamba2_spec_verify, mamba2_flush,
mamba2_state_update):

- against the fp64 sequential recurrence over long runs with commits (tests/helpers.Sim: every
  step checks the outputs with the flash-attention rule, NaN-poisoned outputs, padding rows
  untouched, every ring byte, the checkpoint at flushes and folds, the cursors exactly), over
  every (state, act) dtype pair, history capacities B in {1, 4, 8, 16, 32}, both routes, mixed
  phases, paged (strided, misaligned and 16-byte aligned) caches and the model geometries;
- against the CPU ops in lockstep: the same call sequence on both devices gives identical rings
  and cursors, and outputs / checkpoints equal to rounding;
- under CUDA-graph capture: one captured decode step replayed through full flush cycles (commit
  between replays, outside the graph) matches eager execution bit for bit;
- mamba2_spec_verify (its own section below): long runs with varlen windows and random accepted
  lengths over B in {8, 16, 32} and T in {1, 2, 4, 8}, the model geometries, lockstep with the CPU
  op, CUDA-graph replay, and its bad-input messages;
- bad inputs fail with the same message on CUDA as on the CPU.

CUDA only: skipped where there is no GPU or the kernels are not built.
"""

import math

import pytest
import torch

from conftest import cuda_skip_reason
from helpers import (DTYPES, Mamba2, Mamba2Geo, Sim, SimConfig, assert_refused_writing_nothing, call_op,
                     error_lines_per_device, run_checked, run_state_update, same_bytes, steps_for_cycles, valid_args,
                     with_ring_len)

OPS = ("mamba2_decode", "mamba2_flush", "mamba2_state_update", "commit", "reset")
_SKIP = cuda_skip_reason(OPS)
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")

NANO = Mamba2Geo(H=96, P=80, N=128, G=8)     # Nemotron-3-Nano-4B
SUPER = Mamba2Geo(H=128, P=64, N=128, G=8)   # Nemotron-3-Super
ODD = Mamba2Geo(H=6, P=64, N=64, G=3)        # 2 heads per group, P one iteration's multiple
WIDE = Mamba2Geo(H=4, P=48, N=256, G=2)      # N = 256, P not a multiple of an iteration's rows
TINY = Mamba2Geo(H=4, P=24, N=16, G=1)       # small N: several rows per warp load

DTYPE_PAIRS = [(s, a) for s in ("fp32", "bf16", "fp16") for a in ("fp32", "bf16", "fp16")]
ROUTES = ["output_only", "state_and_output"]


def _decode_cfg(**kw):
    base = dict(mode="decode", T=1, device="cuda", reset_prob=0.0)
    base.update(kw)
    return SimConfig(**base)


# --- long runs against the recurrence ----------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_long_run_mixed_phases(route):
    """200 steps, 8 staggered rows (every flush phase in one batch), padding by -1 and null_slot,
    replacements, folds on demand, misaligned paged caches."""
    cfg = _decode_cfg(Bcap=16, rows=8, spare_slots=3, steps=200, state="fp32", act="bf16", paged=True,
                      null_slot=2, pad_prob=0.1, reset_prob=0.01, fold_prob=0.03, route=route, seed=1)
    stats = run_checked(Mamba2(ODD), cfg, min_flushes=5)
    assert stats.folds > 0 and stats.pad_rows > 0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("state,act", DTYPE_PAIRS)
def test_dtype_pairs(state, act, route):
    i = DTYPE_PAIRS.index((state, act))
    cfg = _decode_cfg(Bcap=4, ring_extra=i % 2, rows=4, spare_slots=2, steps=steps_for_cycles(4, 1, 4, cycles=3),
                      state=state, act=act, paged=bool(i % 2), null_slot=(0 if i % 3 == 0 else None),
                      route=route, fold_prob=0.05, seed=20 + i)
    run_checked(Mamba2(ODD), cfg, min_flushes=3)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("Bcap", [1, 4, 8, 16, 32])
def test_history_capacities(Bcap, route):
    cfg = _decode_cfg(Bcap=Bcap, ring_extra=Bcap % 3, rows=4, spare_slots=2, steps=steps_for_cycles(Bcap, 1, 4),
                      state="fp32", act="bf16", paged=Bcap % 2 == 0, route=route, seed=40 + Bcap)
    run_checked(Mamba2(WIDE if Bcap == 8 else ODD), cfg)


@pytest.mark.parametrize("use_D,use_z,use_dt_bias,dt_softplus", [
    (False, False, False, True), (True, True, True, False), (True, False, True, True)])
def test_optional_inputs(use_D, use_z, use_dt_bias, dt_softplus):
    fam = Mamba2(TINY, use_D=use_D, use_z=use_z, use_dt_bias=use_dt_bias, dt_softplus=dt_softplus)
    cfg = _decode_cfg(Bcap=4, rows=3, steps=steps_for_cycles(4, 1, 3), state="fp32", act="fp32",
                      route="output_only", fold_prob=0.1, seed=60)
    run_checked(fam, cfg)


@pytest.mark.parametrize("geo", ["nano", "super"])
@pytest.mark.parametrize("route", ROUTES)
def test_model_geometries(geo, route):
    cfg = _decode_cfg(Bcap=16, rows=3, spare_slots=1, steps=steps_for_cycles(16, 1, 3), state="fp32", act="bf16",
                      paged=True, null_slot=0, fold_prob=0.03, route=route, seed=70)
    run_checked(Mamba2(NANO if geo == "nano" else SUPER), cfg)


# --- the decode's stream order ------------------------------------------------------------------

@pytest.mark.parametrize("order", ["stream_first", "entries_first"])
@pytest.mark.parametrize("geo,Bcap,rows", [
    (ODD, 16, 8),    # N = 64, P one iteration's multiple; 8 staggered rows: every phase in a batch
    (WIDE, 8, 5),    # N = 256, P = 48 not a multiple of an iteration's rows
    (TINY, 4, 6),    # N = 16: several rows per warp load
    (NANO, 16, 3),   # the model geometry (P = 80, N = 128)
], ids=["odd", "wide", "tiny", "nano"])
def test_decode_stream_order_forms(geo, Bcap, rows, order, monkeypatch):
    """The output-only decode's non-flush rows with their state stream before their entries' terms
    (REPLAYSSM_M2_DECODE_STREAM_FIRST=1) and after them (=0), over two flush cycles per row with
    padding and paged caches: both orders against the recurrence. Flush rows take the same path
    either way. The stream-first instance is built for 16-byte aligned state views, so its pages
    are aligned; the other order runs on pages off the 16-byte grid. No folds on demand: the
    variable set to 1 makes mamba2_flush raise (it has no such rows), and folds restart a row's
    cycle, which the step count does not allow for."""
    monkeypatch.setenv("REPLAYSSM_M2_DECODE_STREAM_FIRST", "1" if order == "stream_first" else "0")
    paged = "aligned" if order == "stream_first" else True
    cfg = _decode_cfg(Bcap=Bcap, rows=rows, spare_slots=2, steps=steps_for_cycles(Bcap, 1, rows), state="fp32",
                      act="bf16", paged=paged, null_slot=0, pad_prob=0.1, fold_prob=0.0, route="output_only",
                      seed=3100 + Bcap + rows)
    run_checked(Mamba2(geo), cfg)


@pytest.mark.parametrize("order", ["stream_first", "entries_first"])
def test_decode_stream_order_whole_heads(order, monkeypatch):
    """Both orders at a batch where every CTA streams a whole head of two stream iterations (the
    launcher's stream-first rule, p_chunk == P): the launcher stops splitting P once the batch
    gives kCtasPerSmTarget (8) CTAs per SM, so the rows are sized from the device's SM count.
    Two flush cycles per row with padding and paged caches (16-byte aligned: the stream-first
    rule's other condition), against the recurrence."""
    geo = Mamba2Geo(H=32, P=32, N=128, G=4)  # fp32 state, N = 128: 16 rows per stream iteration
    rows = -(-8 * torch.cuda.get_device_properties(0).multi_processor_count // geo.H)
    monkeypatch.setenv("REPLAYSSM_M2_DECODE_STREAM_FIRST", "1" if order == "stream_first" else "0")
    cfg = _decode_cfg(Bcap=8, rows=rows, spare_slots=2, steps=steps_for_cycles(8, 1, rows), state="fp32",
                      act="bf16", paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.0, route="output_only",
                      seed=3200 + rows)
    run_checked(Mamba2(geo), cfg)


def _decode_steps_under(variable, values, make_args, monkeypatch):
    """One mamba2_decode call on make_args() per value of the launch override `variable`: the calls'
    arguments as written (outputs and caches), after a synchronize."""
    results = []
    for value in values:
        monkeypatch.setenv(variable, value)
        args = make_args()
        call_op("mamba2_decode", args)
        results.append(args)
    torch.cuda.synchronize()
    return results


def _assert_steps_bit_identical(results, what):
    assert not torch.isnan(results[0]["out"].float()).any()
    for n in ("out", "state", "ring_x", "ring_B", "ring_dt"):
        assert same_bytes(results[0][n], results[1][n]), f"{n} differs between {what}"


def test_decode_stream_orders_bit_identical(monkeypatch):
    """Both stream orders compute the same products in the same order: one output-only decode step
    (a non-flush row mid-history, a flushing row, a padding row) gives bit-identical outputs, rings
    and checkpoints."""
    results = _decode_steps_under("REPLAYSSM_M2_DECODE_STREAM_FIRST", ("1", "0"),
                                  lambda: valid_args("mamba2_decode", device="cuda", seed=5), monkeypatch)
    _assert_steps_bit_identical(results, "the stream orders")


@pytest.mark.parametrize("op,route", [("mamba2_decode", "output_only"), ("mamba2_decode", "state_and_output"),
                                      ("mamba2_flush", None)])
def test_aligned_and_misaligned_views_bit_identical(op, route):
    """With an fp32 checkpoint, a 16-byte aligned state view takes the instances compiled for aligned
    views and a view off the grid the ones that test alignment at run time: the same call (a
    non-flush row mid-history, a flushing row, a padding row) on both views gives bit-identical
    outputs, rings and checkpoints."""
    results = []
    for misaligned in (False, True):
        args = valid_args(op, device="cuda", seed=6)
        if route is not None:
            args["route"] = route
        if misaligned:
            _misaligned_state(args)
        call_op(op, args)
        results.append({n: args[n] for n in ("out", "state", "ring_x", "ring_B", "ring_dt") if n in args})
    torch.cuda.synchronize()
    assert results[0]["state"].storage_offset() % 4 == 0 and results[1]["state"].storage_offset() % 4 == 1
    for n in results[0]:
        assert same_bytes(results[0][n], results[1][n]), f"{n} differs between the aligned and misaligned views"


@pytest.mark.parametrize("op,route,state,misaligned,value,message", [
    ("mamba2_decode", "output_only", torch.float32, False, "2", "REPLAYSSM_M2_DECODE_STREAM_FIRST must be 0 or 1"),
    ("mamba2_decode", "output_only", torch.float32, False, "on", "REPLAYSSM_M2_DECODE_STREAM_FIRST must be 0 or 1"),
    ("mamba2_decode", "state_and_output", torch.float32, False, "1",
     "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: only mamba2_decode's output-only"),
    ("mamba2_flush", None, torch.float32, False, "1",
     "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: only mamba2_decode's output-only"),
    ("mamba2_decode", "output_only", torch.bfloat16, False, "1",
     "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: the stream-first order is built for an fp32 checkpoint"),
    ("mamba2_decode", "output_only", torch.float32, True, "1",
     "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: the stream-first order is built for 16-byte aligned state views"),
])
def test_decode_stream_first_override_errors(op, route, state, misaligned, value, message, monkeypatch):
    """REPLAYSSM_M2_DECODE_STREAM_FIRST other than 0 / 1, or 1 on a launch with no output-only rows
    (the state-and-output route, mamba2_flush), with a 2-byte checkpoint or on a state view off the
    16-byte grid (the order is not built for those): the error names the variable, and the launch
    writes nothing."""
    args = valid_args(op, device="cuda", state_dtype=state)
    _assert_override_raises(op, args, route, misaligned, "REPLAYSSM_M2_DECODE_STREAM_FIRST", value, message,
                            monkeypatch)


@pytest.mark.parametrize("op,route", [("mamba2_decode", "output_only"), ("mamba2_decode", "state_and_output"),
                                      ("mamba2_flush", None), ("mamba2_spec_verify", None)])
def test_ring_too_long_for_shared_memory(op, route):
    """A ring whose entries one CTA cannot stage (R = 16384 entries at P = N = 8: over a megabyte of
    shared memory) is refused before anything launches: the error names R (and max_tokens for the
    spec verify) with its value, the bytes one CTA needs and the device's per-block limit, and no
    tensor argument is written."""
    R = 16384
    args = with_ring_len(valid_args(op, device="cuda"), ("ring_x", "ring_B", "ring_dt"), R)
    if route is not None:
        args["route"] = route
    tokens = rf" and max_tokens = {args['max_tokens']}" if op == "mamba2_spec_verify" else ""
    assert_refused_writing_nothing(
        op, args, rf"{op}: .*R = {R} ring entries \(ring_x's third dimension\){tokens} with P = 8, N = 8: one CTA "
                  rf"needs \d+ bytes of shared memory, the device allows \d+ per block")


def _assert_override_raises(op, args, route, misaligned, variable, value, message, monkeypatch):
    """The call (on `route`, its state view moved off the 16-byte grid if `misaligned`) with the
    launch override `variable` set to `value` raises `message` and writes nothing."""
    if route is not None:
        args["route"] = route
    if misaligned:
        _misaligned_state(args)
    written = {n: v for n, v in args.items() if n in ("state", "ring_x", "ring_B", "ring_dt", "out")}
    before = {n: v.clone() for n, v in written.items()}
    monkeypatch.setenv(variable, value)
    with pytest.raises(RuntimeError, match=message):
        call_op(op, args)
    torch.cuda.synchronize()
    for n in written:
        assert same_bytes(written[n], before[n]), f"a failed launch wrote {n}"


# --- the output-only decode's warp-rows kernel (small batches) ------------------------------------

WARP_ROWS_CASES = [
    # geometry, B, rows, activations, the layer's options (D, z, dt_bias, softplus)
    (NANO, 16, 2, "bf16", True),                         # the model geometry at batch 2: 16-row chunks
    (SUPER, 30, 1, "fp16", True),                        # a ring of 31 entries, the most: B_j . C sums in every lane
    (Mamba2Geo(H=4, P=40, N=128, G=2), 8, 3, "fp32", True),   # a last chunk of 8 rows: idle warps
    (Mamba2Geo(H=6, P=48, N=128, G=3), 1, 2, "bf16", False),  # B = 1; no D, z, dt_bias or softplus
]


@pytest.mark.parametrize("kernel", ["warp_rows", "replay"])
@pytest.mark.parametrize("geo,Bcap,rows,act,options", WARP_ROWS_CASES, ids=["nano", "super_r31", "p40", "b1_bare"])
def test_decode_warp_rows_forms(geo, Bcap, rows, act, options, kernel, monkeypatch):
    """The output-only decode on the warp-rows kernel (REPLAYSSM_M2_DECODE_WARP_ROWS=1: every row forms
    its outputs per warp from registers, flushing rows fold there too) and on the replay kernel
    (=0), over flush cycles with every phase in the batch, padding and 16-byte aligned pages,
    against the recurrence: outputs, rings, cursors and the checkpoint at every flush."""
    monkeypatch.setenv("REPLAYSSM_M2_DECODE_WARP_ROWS", "1" if kernel == "warp_rows" else "0")
    fam = Mamba2(geo) if options else Mamba2(geo, use_D=False, use_z=False, use_dt_bias=False, dt_softplus=False)
    cfg = _decode_cfg(Bcap=Bcap, rows=rows, spare_slots=2, steps=steps_for_cycles(Bcap, 1, rows), state="fp32",
                      act=act, paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.0, route="output_only",
                      seed=3600 + Bcap + rows)
    run_checked(fam, cfg)


def test_decode_warp_rows_launcher_choice(monkeypatch):
    """With the variable unset the launcher takes the warp-rows kernel where P splits into chunks of
    at most 16 rows (nano, batch 1): 200 steps of one row with padding and folds on demand, against
    the recurrence."""
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_WARP_ROWS", raising=False)
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_STREAM_FIRST", raising=False)
    cfg = _decode_cfg(Bcap=16, rows=1, spare_slots=1, steps=200, state="fp32", act="bf16", paged="aligned",
                      null_slot=0, pad_prob=0.1, fold_prob=0.03, route="output_only", seed=3700)
    run_checked(Mamba2(NANO), cfg, min_flushes=5)


def test_decode_warp_rows_rings_bit_identical(monkeypatch):
    """Both kernels write the same ring entry: one output-only decode step at dstate 128 (a non-flush
    row mid-history, a flushing row, a padding row) gives bit-identical rings. The warp-rows kernel
    folds a flushing row in its own order, so the checkpoints agree within a few fp32 units in the
    last place (the recurrence tests bound both against the truth), and the outputs, summed in
    another order on every row, within a few bf16 units."""
    def make_args():
        args = valid_args("mamba2_decode", device="cuda", seed=7)
        _dstate_128(args)
        args["route"] = "output_only"
        return args

    results = _decode_steps_under("REPLAYSSM_M2_DECODE_WARP_ROWS", ("1", "0"), make_args, monkeypatch)
    for n in ("ring_x", "ring_B", "ring_dt"):
        assert same_bytes(results[0][n], results[1][n]), f"{n} differs between the two kernels"
    torch.testing.assert_close(results[0]["state"], results[1]["state"], rtol=2 ** -18, atol=1e-6)
    flushing = results[0]["flush"][results[0]["slots"].long().clamp(min=0)].bool().cpu()
    live = (results[0]["slots"] >= 0).cpu()
    out_w, out_r = results[0]["out"].float().cpu(), results[1]["out"].float().cpu()
    assert live.any() and (live & ~flushing).any() and (live & flushing).any()
    torch.testing.assert_close(out_w[live], out_r[live], rtol=2 ** -7, atol=1e-5)


@pytest.mark.parametrize("op,route,state,misaligned,env,message", [
    ("mamba2_decode", "output_only", torch.float32, False, {"REPLAYSSM_M2_DECODE_WARP_ROWS": "2"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS must be 0 or 1"),
    ("mamba2_decode", "state_and_output", torch.float32, False, {"REPLAYSSM_M2_DECODE_WARP_ROWS": "1"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel runs mamba2_decode's output-only route"),
    ("mamba2_flush", None, torch.float32, False, {"REPLAYSSM_M2_DECODE_WARP_ROWS": "1"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel runs mamba2_decode's output-only route"),
    ("mamba2_decode", "output_only", torch.bfloat16, False, {"REPLAYSSM_M2_DECODE_WARP_ROWS": "1"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel is built for an fp32 checkpoint and dstate 128"),
    ("mamba2_decode", "output_only", torch.float32, True, {"REPLAYSSM_M2_DECODE_WARP_ROWS": "1"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel runs mamba2_decode's output-only route on a "
     "16-byte aligned state view"),
    ("mamba2_decode", "output_only", torch.float32, False,
     {"REPLAYSSM_M2_DECODE_WARP_ROWS": "1", "REPLAYSSM_M2_DECODE_STREAM_FIRST": "1"},
     "REPLAYSSM_M2_DECODE_WARP_ROWS=1 and REPLAYSSM_M2_DECODE_STREAM_FIRST=1 select two kernels"),
])
def test_decode_warp_rows_override_errors(op, route, state, misaligned, env, message, monkeypatch):
    """REPLAYSSM_M2_DECODE_WARP_ROWS other than 0 / 1, or 1 where the warp-rows kernel does not run (the
    state-and-output route, mamba2_flush, a 2-byte checkpoint, a state view off the 16-byte grid) or
    beside a forced stream-first order: the error names the variable, and the launch writes
    nothing."""
    args = valid_args(op, device="cuda", state_dtype=state)
    _dstate_128(args)
    for name, value in list(env.items())[1:]:
        monkeypatch.setenv(name, value)
    variable, value = next(iter(env.items()))
    _assert_override_raises(op, args, route, misaligned, variable, value, message, monkeypatch)


# --- the state-and-output route's rank update on tensor cores ------------------------------------

MMA_CASES = [
    (NANO, 16, 3),                               # the model geometry; small batch: P split into tiles
    (SUPER, 32, 3),                              # two 16-entry steps of the update (n_upd up to 32)
    (Mamba2Geo(H=4, P=40, N=128, G=2), 8, 6),    # P not a multiple of the 16-row tile
    (Mamba2Geo(H=4, P=48, N=128, G=1), 1, 4),    # B = 1: an update of at most one entry
]


# The update forms and the variables that force them: the tensor cores with the instance bounded
# for eight CTAs per SM and with the one bounded for nine (REPLAYSSM_M2_DECODE_MMA_NINE), the CUDA
# cores.
UPDATE_FORMS = {
    "tensor_cores_eight": {"REPLAYSSM_M2_DECODE_MMA": "1", "REPLAYSSM_M2_DECODE_MMA_NINE": "0"},
    "tensor_cores_nine": {"REPLAYSSM_M2_DECODE_MMA": "1", "REPLAYSSM_M2_DECODE_MMA_NINE": "1"},
    "cuda_cores": {"REPLAYSSM_M2_DECODE_MMA": "0"},
}


def _set_update_form(form, monkeypatch):
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_MMA_NINE", raising=False)
    for name, value in UPDATE_FORMS[form].items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("update", list(UPDATE_FORMS))
@pytest.mark.parametrize("geo,Bcap,rows", MMA_CASES, ids=["nano", "super_b32", "p40", "b1"])
def test_decode_update_forms(geo, Bcap, rows, update, monkeypatch):
    """The state-and-output route with its rank update on the tensor cores (REPLAYSSM_M2_DECODE_MMA=1;
    both instances, the eight- and the nine-CTA bound with its dot products over the staged x_j)
    and on the CUDA cores (=0), over flush cycles with every phase in the batch, padding and 16-byte
    aligned pages (the tensor-core update's condition), against the recurrence: outputs, rings,
    cursors and the checkpoint at every flush. No folds on demand (mamba2_flush raises with the
    variable set to 1, as it has no state-and-output rows)."""
    _set_update_form(update, monkeypatch)
    cfg = _decode_cfg(Bcap=Bcap, rows=rows, spare_slots=2, steps=steps_for_cycles(Bcap, 1, rows), state="fp32",
                      act="bf16", paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.0,
                      route="state_and_output", seed=3300 + Bcap + rows)
    run_checked(Mamba2(geo), cfg)


def test_decode_update_tensor_cores_whole_heads(monkeypatch):
    """The tensor-core update (forced: at B = 8 the launcher keeps the CUDA cores here) at a batch where
    every CTA takes a whole head (the launcher stops splitting P at kCtasPerSmTarget CTAs per SM,
    so the rows are sized from the SM count), P = 48 (three tiles, each warp a 32-column slice of
    every tile), two flush cycles per row, against the recurrence."""
    geo = Mamba2Geo(H=32, P=48, N=128, G=4)
    rows = -(-8 * torch.cuda.get_device_properties(0).multi_processor_count // geo.H)
    monkeypatch.setenv("REPLAYSSM_M2_DECODE_MMA", "1")
    cfg = _decode_cfg(Bcap=8, rows=rows, spare_slots=2, steps=steps_for_cycles(8, 1, rows), state="fp32",
                      act="bf16", paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.0,
                      route="state_and_output", seed=3400 + rows)
    run_checked(Mamba2(geo), cfg)


class _SteepDecayMamba2(Mamba2):
    """Heads with A scaled by 1, 20, 200 and 2000 in turn: with δ ~ 0.03 their history's total decay
    falls below 2^-64 (and to zero in fp32) within a few entries on the steeper heads and never on
    the first."""

    def make_layer(self, gen):
        p = super().make_layer(gen)
        p["A"] = p["A"] * torch.tensor([1.0, 20.0, 200.0, 2000.0]).repeat(self.geo.H // 4 + 1)[:self.geo.H]
        return p


@pytest.mark.parametrize("update", ["tensor_cores_eight", "tensor_cores_nine"])
def test_decode_update_tensor_cores_steep_decay(update, monkeypatch):
    """The tensor-core update (forced, both instances) on heads whose decays span ordinary to
    underflowing: the weights w_j and the total decay c0 then range from ~1 to 0 within one tile's
    update, whose X terms and scaled state must still meet the recurrence; one batch with every
    phase, against the recurrence over flush cycles."""
    _set_update_form(update, monkeypatch)
    cfg = _decode_cfg(Bcap=16, rows=6, spare_slots=2, steps=steps_for_cycles(16, 1, 6), state="fp32", act="bf16",
                      paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.0, route="state_and_output", seed=3600)
    run_checked(_SteepDecayMamba2(Mamba2Geo(H=8, P=48, N=128, G=2)), cfg)


@pytest.mark.parametrize("rows", [2, 8])
def test_decode_update_launcher_choice(rows, monkeypatch):
    """With the variable unset (the launcher takes the tensor-core update on state-and-output
    launches with an fp32 checkpoint, bf16 activations, N = 128 and an aligned view where the ring
    holds more than 16 entries or P splits into one 16-row tile per CTA): nano rows at B = 16 whose
    P splits into one tile per CTA (2 rows) or several (8), on the state-and-output route, over
    flush cycles with padding, folds on demand and aligned pages, against the recurrence."""
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_MMA", raising=False)
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_MMA_NINE", raising=False)
    cfg = _decode_cfg(Bcap=16, rows=rows, spare_slots=1, steps=steps_for_cycles(16, 1, rows), state="fp32",
                      act="bf16", paged="aligned", null_slot=0, pad_prob=0.1, fold_prob=0.05,
                      route="state_and_output", seed=3500 + rows)
    run_checked(Mamba2(NANO), cfg)


def _dstate_128(args):
    """valid_args' decode call with dstate 128 (the tensor-core update's width): B, C, the state and
    the ring's B redrawn at that width."""
    g = torch.Generator().manual_seed(11)
    for name in ("B", "C", "state", "ring_B"):
        if name not in args:  # mamba2_flush: no step inputs
            continue
        old = args[name]
        args[name] = torch.randn(*old.shape[:-1], 128, generator=g).to(old.dtype).to(old.device)


@pytest.mark.parametrize("op,route,state,act,misaligned,value,message", [
    ("mamba2_decode", "state_and_output", torch.float32, torch.bfloat16, False, "2",
     "REPLAYSSM_M2_DECODE_MMA must be 0 or 1"),
    ("mamba2_decode", "output_only", torch.float32, torch.bfloat16, False, "1",
     "REPLAYSSM_M2_DECODE_MMA=1: only mamba2_decode's state-and-output route"),
    ("mamba2_flush", None, torch.float32, torch.bfloat16, False, "1",
     "REPLAYSSM_M2_DECODE_MMA=1: only mamba2_decode's state-and-output route"),
    ("mamba2_decode", "state_and_output", torch.bfloat16, torch.bfloat16, False, "1",
     "REPLAYSSM_M2_DECODE_MMA=1: the tensor-core update is built for an fp32 checkpoint, bf16 activations"),
    ("mamba2_decode", "state_and_output", torch.float32, torch.float16, False, "1",
     "REPLAYSSM_M2_DECODE_MMA=1: the tensor-core update is built for an fp32 checkpoint, bf16 activations"),
    ("mamba2_decode", "state_and_output", torch.float32, torch.bfloat16, True, "1",
     "REPLAYSSM_M2_DECODE_MMA=1: the tensor-core update is built for 16-byte aligned state views"),
])
def test_decode_mma_override_errors(op, route, state, act, misaligned, value, message, monkeypatch):
    """REPLAYSSM_M2_DECODE_MMA other than 0 / 1, or 1 where the tensor-core update does not run (the
    output-only route, mamba2_flush, a 2-byte checkpoint, fp16 activations, a state view off the
    16-byte grid): the error names the variable, and the launch writes nothing."""
    args = valid_args(op, device="cuda", act=act, state_dtype=state)
    _dstate_128(args)
    _assert_override_raises(op, args, route, misaligned, "REPLAYSSM_M2_DECODE_MMA", value, message, monkeypatch)


def test_decode_update_nine_ctas_bit_identical(monkeypatch):
    """The tensor-core update's two instances (eight- and nine-CTA bound) differ only in where the
    per-warp dot products lie in shared memory: one state-and-output decode step (a non-flush row
    mid-history, a flushing row, a padding row) gives bit-identical outputs, rings and checkpoints."""
    def make_args():
        args = valid_args("mamba2_decode", device="cuda", act=torch.bfloat16, state_dtype=torch.float32, seed=7)
        _dstate_128(args)
        args["route"] = "state_and_output"
        return args

    monkeypatch.setenv("REPLAYSSM_M2_DECODE_MMA", "1")
    results = _decode_steps_under("REPLAYSSM_M2_DECODE_MMA_NINE", ("0", "1"), make_args, monkeypatch)
    _assert_steps_bit_identical(results, "the eight- and nine-CTA instances")


NINE_NOT_TAKEN = "REPLAYSSM_M2_DECODE_MMA_NINE=1: the nine-CTA bound is built for the tensor-core update only"


@pytest.mark.parametrize("op,route,mma,value,message", [
    ("mamba2_decode", "state_and_output", None, "2", "REPLAYSSM_M2_DECODE_MMA_NINE must be 0 or 1"),
    ("mamba2_decode", "state_and_output", "0", "1", NINE_NOT_TAKEN),
    ("mamba2_decode", "output_only", None, "1", NINE_NOT_TAKEN),
    ("mamba2_flush", None, None, "1", NINE_NOT_TAKEN),
])
def test_decode_mma_nine_override_errors(op, route, mma, value, message, monkeypatch):
    """REPLAYSSM_M2_DECODE_MMA_NINE other than 0 / 1, or 1 on a launch that does not take the
    tensor-core update (the CUDA cores forced, the output-only route, mamba2_flush): the error names
    the variable, and the launch writes nothing."""
    args = valid_args(op, device="cuda", act=torch.bfloat16, state_dtype=torch.float32)
    _dstate_128(args)
    monkeypatch.delenv("REPLAYSSM_M2_DECODE_MMA", raising=False)
    if mma is not None:
        monkeypatch.setenv("REPLAYSSM_M2_DECODE_MMA", mma)
    _assert_override_raises(op, args, route, False, "REPLAYSSM_M2_DECODE_MMA_NINE", value, message, monkeypatch)


# --- the baseline ------------------------------------------------------------------------------

@pytest.mark.parametrize("state,act", DTYPE_PAIRS)
def test_state_update_plain(state, act):
    run_state_update(Mamba2(ODD), "cuda", state, act, rows=5, steps=12, seed=80, null_slot=0)


@pytest.mark.parametrize("geo,T", [("odd", 3), ("wide", 4), ("nano", 1)])
def test_state_update_snapshots(geo, T):
    g = {"odd": ODD, "wide": WIDE, "nano": NANO}[geo]
    run_state_update(Mamba2(g), "cuda", "fp32", "bf16", rows=3, steps=6, T=T, seed=90 + T)


UPDATE_ROWS_CASES = [
    # geometry, rows, activations, the layer's options (D, z, dt_bias, softplus)
    (NANO, 2, "bf16", True),                              # the model geometry at batch 2: 16-row chunks
    (SUPER, 1, "fp16", True),
    (Mamba2Geo(H=4, P=40, N=128, G=2), 3, "fp32", True),  # a last chunk of 8 rows: idle warps
    (Mamba2Geo(H=6, P=48, N=128, G=3), 2, "bf16", False),  # no D, z, dt_bias or softplus
]


@pytest.mark.parametrize("kernel", ["rows", "general"])
@pytest.mark.parametrize("geo,rows,act,options", UPDATE_ROWS_CASES, ids=["nano", "super", "p40", "bare"])
def test_state_update_rows_forms(geo, rows, act, options, kernel, monkeypatch):
    """The classic step on the rows kernel (REPLAYSSM_M2_UPDATE_ROWS=1: each warp updates four state
    rows in registers, no shared memory) and on the general kernel (=0), chained over 40 steps with
    padding rows, against the recurrence: outputs, written states, untouched slots."""
    monkeypatch.setenv("REPLAYSSM_M2_UPDATE_ROWS", "1" if kernel == "rows" else "0")
    fam = Mamba2(geo) if options else Mamba2(geo, use_D=False, use_z=False, use_dt_bias=False, dt_softplus=False)
    run_state_update(fam, "cuda", "fp32", act, rows=rows, steps=40, seed=3900 + rows, null_slot=0)


@pytest.mark.parametrize("state,misaligned,value,message", [
    (torch.float32, False, "2", "REPLAYSSM_M2_UPDATE_ROWS must be 0 or 1"),
    (torch.bfloat16, False, "1", "REPLAYSSM_M2_UPDATE_ROWS=1: the rows kernel is built for an fp32 state and dstate 128"),
    (torch.float32, True, "1", "REPLAYSSM_M2_UPDATE_ROWS=1: the rows kernel runs the plain form \\(one token per "
                               "row\\) on a 16-byte aligned state view"),
])
def test_state_update_rows_override_errors(state, misaligned, value, message, monkeypatch):
    """REPLAYSSM_M2_UPDATE_ROWS other than 0 / 1, or 1 where the rows kernel does not run (a 2-byte
    state, a state view off the 16-byte grid): the error names the variable, and the launch writes
    nothing."""
    args = valid_args("mamba2_state_update", device="cuda", state_dtype=state)
    _dstate_128(args)
    _assert_override_raises("mamba2_state_update", args, None, misaligned, "REPLAYSSM_M2_UPDATE_ROWS", value, message,
                            monkeypatch)


# --- lockstep with the CPU ops -----------------------------------------------------------------

def _rel_err(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


# Two float32 evaluations of the same formula differ by rounding only: the bound is a few units of
# the compared dtype's last place (outputs and checkpoints are rounded to it) relative to the
# largest magnitude, plus float32 accumulation noise over ~N products.
def _rounding_bound(dtype, N):
    return 4 * torch.finfo(dtype).eps + 64 * torch.finfo(torch.float32).eps * math.sqrt(N)


def _lockstep_setup(geo, num_slots, rows, R, sd, ad, gen):
    """The twin caches of a CPU-vs-CUDA lockstep run: the same random paged caches (slot stride
    wider than a slot, 16-byte aligned) and zero cursors on both devices, the layer parameters on
    both, and a random slot per row."""
    fam = Mamba2(geo)
    layer = fam.make_layer(gen)

    def paged(shape, dtype, pad):
        inner = math.prod(shape)
        page = torch.randn(num_slots, inner + pad, generator=gen).to(dtype)
        return page, page[:, :inner].view(num_slots, *shape)

    cpu, pages = {}, {}
    pages["state"], cpu["state"] = paged(fam.state_shape(), sd, 8)
    for name, shape in fam.ring_shapes(R).items():
        pages[name], cpu[name] = paged(shape, fam.ring_dtypes(ad)[name], 8)
    cuda_pages = {k: v.cuda() for k, v in pages.items()}
    cuda = {k: cuda_pages[k][:, :cpu[k][0].numel()].view(cpu[k].shape) for k in cpu}
    assert cuda["state"].stride(0) != cuda["state"][0].numel() and cuda["state"].data_ptr() % 16 == 0
    cur_cpu = {"hist": torch.zeros(num_slots, dtype=torch.int32), "start": torch.zeros(num_slots, dtype=torch.int32),
               "flush": torch.zeros(num_slots, dtype=torch.int8)}
    cur_gpu = {k: v.cuda() for k, v in cur_cpu.items()}
    row_slot = torch.randperm(num_slots, generator=gen)[:rows].tolist()
    lay_gpu = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in layer.items()}

    def assert_page_padding_untouched():
        for name in pages:
            inner = cpu[name][0].numel()
            assert same_bytes(cuda_pages[name][:, inner:], pages[name][:, inner:]), f"{name}: page padding written"

    return fam, layer, lay_gpu, cpu, cuda, cur_cpu, cur_gpu, row_slot, assert_page_padding_untouched


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("state,act", [("fp32", "bf16"), ("bf16", "fp32"), ("fp16", "fp16")])
def test_lockstep_with_cpu(state, act, route):
    """The same decode / commit / flush sequence on CPU and CUDA: rings and cursors identical,
    outputs and checkpoints equal to rounding. The CUDA cache is a 16-byte-aligned paged view (the
    vector path with a slot stride that is not the tensor's own size)."""
    geo, Bcap, rows, num_slots, steps = ODD, 8, 6, 9, 40
    R = Bcap + 1 + 2
    sd, ad = DTYPES[state], DTYPES[act]
    gen = torch.Generator().manual_seed(7)
    fam, layer, lay_gpu, cpu, cuda, cur_cpu, cur_gpu, row_slot, assert_page_padding_untouched = _lockstep_setup(
        geo, num_slots, rows, R, sd, ad, gen)
    flushes = 0
    for k in range(steps):
        live = [k >= r and torch.rand((), generator=gen).item() > 0.15 for r in range(rows)]  # staggered
        slots = torch.tensor([row_slot[r] if live[r] else -1 for r in range(rows)], dtype=torch.int32)
        tok = {n: v[:, 0] for n, v in fam.make_tokens(gen, (rows, 1), ad).items()}
        flushes += sum(int(cur_cpu["flush"][s]) for s, lv in zip(slots.tolist(), live) if lv)
        out_c = torch.full((rows, geo.H, geo.P), float("nan"), dtype=ad)
        out_g = out_c.cuda()
        fam.decode(tok, layer, slots, cur_cpu, cpu, out_c, None, route=route)
        fam.decode({n: v.cuda() for n, v in tok.items()}, lay_gpu, slots.cuda(), cur_gpu, cuda, out_g, None,
                   route=route)
        rows_live = torch.tensor(live)
        assert torch.isnan(out_g[~rows_live.cuda()].float()).all(), f"step {k}: a padding row's output was written"
        assert _rel_err(out_g[rows_live.cuda()], out_c[rows_live]) <= _rounding_bound(ad, geo.N), f"step {k}: outputs"
        for name in ("ring_x", "ring_B"):
            assert same_bytes(cuda[name], cpu[name]), f"step {k}: {name} differs from the CPU op's"
        assert _rel_err(cuda["ring_dt"], cpu["ring_dt"]) <= 4 * torch.finfo(torch.float32).eps, f"step {k}: ring_dt"
        assert _rel_err(cuda["state"], cpu["state"]) <= _rounding_bound(sd, geo.N), f"step {k}: checkpoints differ"
        # Keep the two checkpoints identical so later steps compare one step's rounding, not a drift.
        cuda["state"].copy_(cpu["state"])
        if k % 9 == 8:  # fold on demand on half the rows, then reset them
            fold = torch.tensor(row_slot[::2] + [-1], dtype=torch.int32)
            fam.flush(layer, fold, cur_cpu, cpu, None)
            fam.flush(lay_gpu, fold.cuda(), cur_gpu, cuda, None)
            assert _rel_err(cuda["state"], cpu["state"]) <= _rounding_bound(sd, geo.N), f"step {k}: fold"
            cuda["state"].copy_(cpu["state"])
            for c in (cur_cpu, cur_gpu):
                torch.ops.replayssm.reset(fold.to(c["hist"].device), c["hist"], c["start"], c["flush"], Bcap, 1)
        accepted = torch.ones(rows, dtype=torch.int32)
        for c in (cur_cpu, cur_gpu):
            torch.ops.replayssm.commit(slots.to(c["hist"].device), accepted.to(c["hist"].device), c["hist"],
                                       c["start"], c["flush"], Bcap, 1, R)
        for name in cur_cpu:
            assert torch.equal(cur_gpu[name].cpu(), cur_cpu[name]), f"step {k}: cursor {name} differs"
    assert_page_padding_untouched()
    assert flushes >= rows, "test setup: too few flush steps"


# --- CUDA graphs -------------------------------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_cuda_graph_replay_matches_eager(route):
    """One decode step captured over a batch in mixed phases, replayed through more than two full
    flush cycles with commit (outside the graph) between replays; eager execution of the same
    sequence on a copy of the caches gives bit-identical outputs, rings and checkpoints."""
    geo, Bcap, rows, num_slots = ODD, 4, 6, 8
    R = Bcap + 1
    gen = torch.Generator().manual_seed(11)
    fam = Mamba2(geo)
    layer = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in fam.make_layer(gen).items()}
    cache = {"state": fam.random_state(gen, (num_slots,), torch.float32).cuda()}
    for name, shape in fam.ring_shapes(R).items():
        cache[name] = torch.randn(num_slots, *shape, generator=gen).to(fam.ring_dtypes(torch.bfloat16)[name]).cuda()
    cur = {"hist": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
           "start": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
           "flush": torch.zeros(num_slots, dtype=torch.int8, device="cuda")}
    slots = torch.tensor([5, 0, -1, 3, 7, 1], dtype=torch.int32, device="cuda")
    live = slots[slots >= 0]
    ones = torch.ones(rows, dtype=torch.int32, device="cuda")
    # Mixed phases: slot i has committed i % (Bcap + 1) entries before the capture.
    for i, s in enumerate(live.tolist()):
        for _ in range(i % (Bcap + 1)):
            torch.ops.replayssm.commit(torch.tensor([s], dtype=torch.int32, device="cuda"), ones[:1], cur["hist"],
                                       cur["start"], cur["flush"], Bcap, 1, R)
    assert len(set(cur["hist"][live].tolist())) > 2, "test setup: phases not mixed"
    eager_cache = {k: v.clone() for k, v in cache.items()}
    eager_cur = {k: v.clone() for k, v in cur.items()}

    steps = 3 * (Bcap + 1)
    toks = [{n: v[:, 0].cuda() for n, v in fam.make_tokens(gen, (rows, 1), torch.bfloat16).items()}
            for _ in range(steps)]
    static_tok = {n: v.clone() for n, v in toks[0].items()}
    static_out = torch.full((rows, geo.H, geo.P), float("nan"), dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        # Capture only (no warm-up call: it would advance nothing but must not write the caches).
        snap = {k: v.clone() for k, v in cache.items()}
        with torch.cuda.graph(graph, stream=stream):
            fam.decode(static_tok, layer, slots, cur, cache, static_out, None, route=route)
    torch.cuda.current_stream().wait_stream(stream)
    for k in snap:
        assert same_bytes(cache[k], snap[k]), "capturing wrote the caches"

    flush_steps = 0
    for k in range(steps):
        flush_steps += int(cur["flush"][live].sum())
        for n in static_tok:
            static_tok[n].copy_(toks[k][n])
        static_out.fill_(float("nan"))
        graph.replay()
        eager_out = torch.full_like(static_out, float("nan"))
        fam.decode(toks[k], layer, slots, eager_cur, eager_cache, eager_out, None, route=route)
        assert same_bytes(static_out, eager_out), f"replay {k}: outputs differ from eager"
        for name in cache:
            assert same_bytes(cache[name], eager_cache[name]), f"replay {k}: {name} differs from eager"
        for c in (cur, eager_cur):
            torch.ops.replayssm.commit(slots, ones, c["hist"], c["start"], c["flush"], Bcap, 1, R)
    assert flush_steps >= 2 * len(live), "test setup: fewer than two flushes per row"
    assert torch.isnan(static_out[2].float()).all(), "padding row written"


# --- validation: the same message as the CPU op ------------------------------------------------

def _decode_args(device, P_ring=64, state_dtype=torch.float32, act=torch.bfloat16, N=64):
    geo = ODD
    gen = torch.Generator().manual_seed(3)
    fam = Mamba2(Mamba2Geo(geo.H, geo.P, N, geo.G))
    layer = fam.make_layer(gen)
    tok = {n: v[:, 0] for n, v in fam.make_tokens(gen, (2, 1), act).items()}
    R, slots_n = 5, 3
    state = torch.zeros(slots_n, geo.H, geo.P, N, dtype=state_dtype)
    ring_x = torch.zeros(slots_n, geo.H, R, P_ring, dtype=act)
    ring_B = torch.zeros(slots_n, geo.G, R, N, dtype=act)
    ring_dt = torch.zeros(slots_n, geo.H, R)
    hist, start = torch.zeros(slots_n, dtype=torch.int32), torch.zeros(slots_n, dtype=torch.int32)
    flush = torch.zeros(slots_n, dtype=torch.int8)
    out = torch.zeros(2, geo.H, geo.P, dtype=act)
    args = [*fam.op_inputs(tok, layer), torch.tensor([0, 1], dtype=torch.int32), hist, start, flush, state, ring_x,
            ring_B, ring_dt, out]
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


# Each case: keyword arguments of _decode_args (a dict expression), an edit of the argument list `a`, the route.
_BAD_CASES = {
    "ring_x_shape": ("dict(P_ring=32)", "", "output_only"),
    "state_dtype": ("dict(state_dtype=torch.float64)", "", "output_only"),
    "route": ("dict()", "", "both"),
    "B_dtype": ("dict()", "a[3] = a[3].float()", "output_only"),
    "out_shape": ("dict()", "a[17] = a[17][:1]", "output_only"),
    "x_not_contiguous": ("dict()", "a[0] = a[0].transpose(1, 2).contiguous().transpose(1, 2)", "output_only"),
}

def _first_error_line(device, case):
    """What mamba2_decode (mamba2_spec_verify for a _SPEC_BAD_CASES case) raises on the broken
    arguments of `case`: 'RAISED:<first line>' or 'NOT RAISED'."""
    if case in _SPEC_BAD_CASES:
        return _spec_first_error_line(device, case)
    kw, edit, route = _BAD_CASES[case]
    a = _decode_args(device, **eval(kw))
    exec(edit)
    try:
        torch.ops.replayssm.mamba2_decode(*a, route)
    except RuntimeError as e:
        return "RAISED:" + str(e).splitlines()[0]
    return "NOT RAISED"


@pytest.fixture(scope="module")
def bad_input_messages():
    return error_lines_per_device("test_mamba2_cuda", list(_BAD_CASES))


@pytest.mark.parametrize("case", list(_BAD_CASES))
def test_bad_inputs_same_message(case, bad_input_messages):
    """The CUDA op raises the CPU op's message (the same validation, in the same order and words)."""
    cpu, cuda = bad_input_messages["cpu"][case], bad_input_messages["cuda"][case]
    assert cpu.startswith("RAISED:mamba2_decode: "), f"cpu: {cpu}"
    assert cuda == cpu, f"cuda: {cuda}\ncpu:  {cpu}"


# =============================================================================================
# mamba2_spec_verify
# =============================================================================================

SPEC_OPS = ("mamba2_spec_verify", "mamba2_flush", "commit", "reset")
_SPEC_SKIP = cuda_skip_reason(SPEC_OPS)
spec_only = pytest.mark.skipif(_SPEC_SKIP is not None, reason=_SPEC_SKIP or "")

# (B, T): every history capacity with every window the CUDA kernels are compiled for.
SPEC_BT = [(b, t) for b in (8, 16, 32) for t in (1, 2, 4, 8)]
SPEC_GEOS = [ODD, TINY, WIDE, Mamba2Geo(H=4, P=16, N=8, G=2)]  # N = 64, 16, 256, 8


@pytest.fixture(params=["launcher", "pairs"])
def spec_heads(request, monkeypatch):
    """Heads per spec CTA: the launcher's choice (one head at these tests' batches: it pairs whole
    heads only when the batch alone fills the GPU twice over) and pairs of whole heads forced with
    REPLAYSSM_M2_SPEC_HEADS=2, which the serving batches of the benchmark take. The launcher reads
    the variable at every launch."""
    if request.param == "pairs":
        monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", "2")
    else:
        monkeypatch.delenv("REPLAYSSM_M2_SPEC_HEADS", raising=False)
    return request.param


def _spec_cfg(**kw):
    base = dict(mode="spec", device="cuda", reset_prob=0.0)
    base.update(kw)
    return SimConfig(**base)


# --- long runs against the recurrence ----------------------------------------------------------

@spec_only
@pytest.mark.parametrize("Bcap,T", SPEC_BT)
def test_spec_long_run(Bcap, T, spec_heads):
    """>= 200 steps with varlen windows (n in 1..T per row) and random accepted lengths, 8 staggered
    rows (mixed flush phases), padding by -1 and null_slot, replacements, folds on demand, misaligned
    paged caches (the element-wise state path; the lockstep and graph tests below take the 16-byte
    vector path), dtype pairs and geometries (N = 64, 16, 256, 8) varying with the case."""
    i = SPEC_BT.index((Bcap, T))
    state, act = DTYPE_PAIRS[(2 * i) % len(DTYPE_PAIRS)]
    cfg = _spec_cfg(Bcap=Bcap, T=T, ring_extra=i % 3, rows=8, spare_slots=2, steps=max(200, 8 * Bcap),
                    state=state, act=act, paged=True, null_slot=(1 if i % 2 else None), pad_prob=0.1,
                    reset_prob=0.005, fold_prob=0.02, seed=1000 + i)
    stats = run_checked(Mamba2(SPEC_GEOS[i % len(SPEC_GEOS)]), cfg, min_flushes=2)
    assert stats.pad_rows > 0 and stats.mixed_phase_steps > 0


@spec_only
@pytest.mark.parametrize("state,act", DTYPE_PAIRS)
def test_spec_dtype_pairs(state, act):
    i = DTYPE_PAIRS.index((state, act))
    cfg = _spec_cfg(Bcap=8, T=4, ring_extra=i % 2, rows=4, spare_slots=2, steps=steps_for_cycles(8, 4, 4, cycles=3),
                    state=state, act=act, paged=bool(i % 2), null_slot=(0 if i % 3 == 0 else None), fold_prob=0.05,
                    seed=1100 + i)
    run_checked(Mamba2(ODD), cfg, min_flushes=3)


@spec_only
@pytest.mark.parametrize("T", [1, 8])
def test_spec_full_windows(T, spec_heads):
    """Every row feeds n = T tokens (the tile full for T = 8; T = 1 runs in the 2-token tile)."""
    cfg = _spec_cfg(Bcap=16, T=T, rows=6, steps=steps_for_cycles(16, T, 6), varlen=False, state="fp32", act="bf16",
                    paged=True, seed=1150 + T)
    run_checked(Mamba2(WIDE), cfg)


@spec_only
@pytest.mark.parametrize("use_D,use_z,use_dt_bias,dt_softplus", [
    (False, False, False, True), (True, True, True, False), (True, False, True, True)])
def test_spec_optional_inputs(use_D, use_z, use_dt_bias, dt_softplus, spec_heads):
    fam = Mamba2(TINY, use_D=use_D, use_z=use_z, use_dt_bias=use_dt_bias, dt_softplus=dt_softplus)
    cfg = _spec_cfg(Bcap=8, T=2, rows=3, steps=steps_for_cycles(8, 2, 3), state="fp32", act="fp32", fold_prob=0.1,
                    seed=1200)
    run_checked(fam, cfg)


@spec_only
@pytest.mark.parametrize("geo", ["nano", "super"])
@pytest.mark.parametrize("T", [4, 8])
def test_spec_model_geometries(geo, T, spec_heads):
    cfg = _spec_cfg(Bcap=16, T=T, rows=3, spare_slots=1, steps=steps_for_cycles(16, T, 3), state="fp32", act="bf16",
                    paged=True, null_slot=0, fold_prob=0.03, seed=1300 + T)
    run_checked(Mamba2(NANO if geo == "nano" else SUPER), cfg)


# --- the spec kernel's two state streams ---------------------------------------------------------

@pytest.fixture(params=["mma", "cuda_cores"])
def spec_stream(request, monkeypatch):
    """The spec kernel's state stream, forced: on tensor cores (REPLAYSSM_M2_SPEC_MMA=1, which raises
    where that stream cannot run, so these tests cannot pass on the other one) or on the CUDA cores
    (=0). Without the variable the launcher takes tensor cores wherever they can run."""
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_MMA", "1" if request.param == "mma" else "0")
    return request.param


@spec_only
@pytest.mark.parametrize("geo,Bcap,T,rows", [
    (NANO, 16, 6, 3),    # P = 80: 5 row tiles per head, a pair's 10 over 4 warps
    (SUPER, 16, 8, 3),
    (ODD, 32, 5, 6),     # histories past 16 entries: the fold's second k-step of entries
    (ODD, 8, 8, 6),      # N = 64: two units of columns
    (Mamba2Geo(H=4, P=32, N=32, G=2), 16, 7, 4),  # N = 32: one unit
    (WIDE, 16, 8, 3),    # N = 256: eight units, P = 48 three row tiles
])
def test_spec_stream_forms(geo, Bcap, T, rows, spec_heads, spec_stream):
    """fp32 checkpoint, bf16 activations (the tensor-core stream's instances), 16-byte aligned caches,
    over two flush cycles per row with varlen windows, random acceptance, padding and folds on
    demand: both streams against the recurrence."""
    cfg = _spec_cfg(Bcap=Bcap, T=T, rows=rows, spare_slots=1, steps=steps_for_cycles(Bcap, T, rows), state="fp32",
                    act="bf16", paged=False, null_slot=0, fold_prob=0.03, seed=1500 + Bcap + T + rows)
    run_checked(Mamba2(geo), cfg)


@spec_only
@pytest.mark.parametrize("geo,Bcap,T,rows", [
    (Mamba2Geo(H=8, P=32, N=64, G=2), 16, 8, 4),  # two quads of one group each, N = 64
    (Mamba2Geo(H=8, P=32, N=128, G=1), 32, 5, 5),  # histories past 16 entries: the fold's second k-step
    (NANO, 16, 6, 3),    # 12 heads per group: 3 quads, P = 80 (20 row tiles over 4 warps)
    (SUPER, 16, 7, 3),   # 16 heads per group, P = 64
    (Mamba2Geo(H=4, P=48, N=256, G=1), 8, 8, 3),  # N = 256, P = 48
])
def test_spec_stream_quads(geo, Bcap, T, rows, monkeypatch):
    """Four heads of a group per CTA (REPLAYSSM_M2_SPEC_HEADS=4; the launcher takes them on the
    tensor-core stream from three waves of quad CTAs on). The stream is the launcher's own choice
    (REPLAYSSM_M2_SPEC_MMA unset): four heads on the CUDA cores would raise. fp32 checkpoint, bf16
    activations, 16-byte aligned caches, two flush cycles per row, varlen windows (T = 5..8), random
    acceptance, padding and folds on demand, against the recurrence."""
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", "4")
    monkeypatch.delenv("REPLAYSSM_M2_SPEC_MMA", raising=False)
    cfg = _spec_cfg(Bcap=Bcap, T=T, rows=rows, spare_slots=1, steps=steps_for_cycles(Bcap, T, rows), state="fp32",
                    act="bf16", paged=False, null_slot=0, fold_prob=0.03, pad_prob=0.1, seed=1600 + Bcap + T + rows)
    run_checked(Mamba2(geo), cfg)


@spec_only
@pytest.mark.parametrize("lead", ["1", "8"])
@pytest.mark.parametrize("geo,T,state,act,heads,paged", [
    (NANO, 4, "fp32", "bf16", "2", False),   # pairs: 160 rows, 10 iterations
    (SUPER, 2, "fp32", "bf16", "1", False),  # one head at a time, the 2-token tile
    (ODD, 3, "bf16", "fp32", "2", False),    # a 2-byte checkpoint
    (WIDE, 4, "fp32", "fp16", "1", True),    # N = 256; paged: the element-wise path takes no prefetch
    (ODD, 8, "fp32", "bf16", "1", False),    # the 8-token tile on the CUDA cores (REPLAYSSM_M2_SPEC_MMA=0)
])
def test_spec_l2_lead_forms(geo, T, state, act, heads, paged, lead, monkeypatch):
    """REPLAYSSM_M2_SPEC_L2: the CUDA-core state stream asks L2 for the iteration `lead` past the one
    it loads (and, at the CTA's start, for the first `lead`), forced at one iteration and past the end
    of every tile (8; the request is clipped to the CTA's rows). The prefetch only warms L2, so the
    results must match the recurrence as without it: two flush cycles per row, varlen windows,
    padding, folds on demand, dtype pairs, both heads-per-CTA forms."""
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_L2", lead)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", heads)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_MMA", "0")
    cfg = _spec_cfg(Bcap=16, T=T, rows=3, spare_slots=1, steps=steps_for_cycles(16, T, 3, cycles=3), state=state,
                    act=act, paged=paged, null_slot=0, fold_prob=0.03, pad_prob=0.1, seed=1900 + T + int(lead))
    run_checked(Mamba2(geo), cfg)


@spec_only
@pytest.mark.parametrize("lead", ["0", "2"])
@pytest.mark.parametrize("geo,act,heads,bcap,ring_extra", [
    (NANO, "bf16", "2", 16, 0),   # pairs: 160 rows, 10 iterations (the serving form)
    (SUPER, "fp16", "1", 16, 0),  # one head at a time, 64 rows
    (WIDE, "fp32", "1", 16, 0),   # N = 256; P = 48, not a multiple of an iteration's rows
    (TINY, "bf16", "2", 16, 0),   # N = 16: several rows per warp load
    (SUPER, "bf16", "2", 8, 2),   # R = 14: the padded fold (B copy) reads 16 entries' room
    (SUPER, "fp16", "1", 8, 3),   # R = 15
])
def test_spec_vec_stream_forms(geo, act, heads, bcap, ring_extra, lead, monkeypatch):
    """REPLAYSSM_M2_SPEC_VEC=1: the CUDA-core stream compiled for 16-byte aligned state views (fp32
    checkpoint, the 4-token tile; its sums presorted by token), forced so that the forms stay covered
    whatever the launcher's rule, with and without the L2 lead (whose bounds only thread 0 works out
    there). Against the recurrence over four flush cycles per row: varlen windows (n = 1..4: 3-token
    windows run in the same tile), padding, folds on demand, unpaged (aligned) caches, both
    heads-per-CTA forms, rings whose length is not a multiple of 4 (the folds of the 2-byte
    activations read their entries in groups of four, padded with zeros: kSpecFoldPadded)."""
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_VEC", "1")
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", heads)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_L2", lead)
    cfg = _spec_cfg(Bcap=bcap, T=4, ring_extra=ring_extra, rows=3, spare_slots=1,
                    steps=steps_for_cycles(bcap, 4, 3, cycles=4), state="fp32", act=act, paged=False, null_slot=0,
                    fold_prob=0.03, pad_prob=0.1, seed=2000 + 10 * int(lead) + geo.N + ring_extra)
    run_checked(Mamba2(geo), cfg)


def _misaligned_state(cache):
    """The cache's state moved to a view 4 bytes into a fresh buffer: a base off the 16-byte grid."""
    state = cache["state"]
    buf = torch.empty(state.numel() + 1, dtype=state.dtype, device=state.device)
    view = buf[1:].view_as(state)
    view.copy_(state)
    cache["state"] = view


_VEC_NOT_BUILT = "REPLAYSSM_M2_SPEC_VEC=1: the aligned-view stream is built for an fp32 checkpoint at windows of 3 or 4"


@spec_only
@pytest.mark.parametrize("value,T,act,misaligned,message", [
    ("2", 4, torch.bfloat16, False, "REPLAYSSM_M2_SPEC_VEC must be 0 or 1"),
    ("on", 4, torch.bfloat16, False, "REPLAYSSM_M2_SPEC_VEC must be 0 or 1"),
    ("1", 2, torch.bfloat16, False, _VEC_NOT_BUILT),
    ("1", 8, torch.bfloat16, False, _VEC_NOT_BUILT),
    ("1", 4, torch.float32, False, _VEC_NOT_BUILT),  # fp32 activations at N = 64
    ("1", 4, torch.bfloat16, True, "REPLAYSSM_M2_SPEC_VEC=1: the aligned-view stream needs a 16-byte aligned state view"),
])
def test_spec_vec_stream_override_errors(value, T, act, misaligned, message, monkeypatch):
    """REPLAYSSM_M2_SPEC_VEC other than 0 / 1, or 1 where the aligned-view stream cannot run (another
    window tile, fp32 activations at dstate 64, a state view off the 16-byte grid): the error names
    the variable and why, and the launch writes nothing."""
    monkeypatch.delenv("REPLAYSSM_M2_SPEC_MMA", raising=False)
    call, cache, out = _two_row_spec(ODD, act, T=T, R=16, seed=12)
    if misaligned:
        _misaligned_state(cache)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_VEC", value)
    _assert_launch_fails_cleanly(call, cache, out, message)


@spec_only
@pytest.mark.parametrize("value,T,message", [
    ("9", 4, "REPLAYSSM_M2_SPEC_L2 must be a count of iterations from 0 to 8"),
    ("-1", 4, "REPLAYSSM_M2_SPEC_L2 must be a count of iterations from 0 to 8"),
    ("two", 4, "REPLAYSSM_M2_SPEC_L2 must be a count of iterations from 0 to 8"),
    ("1", 8, "REPLAYSSM_M2_SPEC_L2 sets the CUDA-core state stream's lead: the tensor-core stream"),
])
def test_spec_l2_lead_override_errors(value, T, message, monkeypatch):
    """REPLAYSSM_M2_SPEC_L2 other than a count from 0 to 8, or a lead where the tensor-core stream
    runs (fp32 checkpoint, bf16, T = 8): the error names the variable and the launch writes nothing."""
    monkeypatch.delenv("REPLAYSSM_M2_SPEC_MMA", raising=False)
    call, cache, out = _two_row_spec(ODD, torch.bfloat16, T=T, R=16, seed=10)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_L2", value)
    _assert_launch_fails_cleanly(call, cache, out, message)


@spec_only
@pytest.mark.parametrize("value,act,geo,T,message", [
    ("1", torch.float16, ODD, 8, "REPLAYSSM_M2_SPEC_MMA=1: the tensor-core stream is built for an fp32 checkpoint, bf16"),
    ("1", torch.bfloat16, ODD, 4, "REPLAYSSM_M2_SPEC_MMA=1: the tensor-core stream is built for an fp32 checkpoint, "
                                  "bf16 activations, windows of 5 to 8 tokens"),
    ("1", torch.bfloat16, Mamba2Geo(H=4, P=24, N=64, G=2), 8, "REPLAYSSM_M2_SPEC_MMA=1: the tensor-core stream needs "
                                                              "headdim P a multiple of 16"),
    ("2", torch.bfloat16, ODD, 8, "REPLAYSSM_M2_SPEC_MMA must be 0 or 1"),
])
def test_spec_stream_override_errors(value, act, geo, T, message, monkeypatch):
    """REPLAYSSM_M2_SPEC_MMA=1 where the tensor-core stream cannot run (the dtypes, a 4-token window,
    headdim), or a value other than 0 / 1: the error names the variable and why, and the launch
    writes nothing."""
    call, cache, out = _two_row_spec(geo, act, T=T, R=16, seed=7)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_MMA", value)
    _assert_launch_fails_cleanly(call, cache, out, message)


def _two_row_spec(geo, act, T, R, seed):
    """Two live rows of one T-token window each on fresh caches (fp32 checkpoint, zero cursors):
    the spec-verify call, its cache and its NaN-filled output, for the launch-override tests."""
    gen = torch.Generator().manual_seed(seed)
    fam = Mamba2(geo)
    layer = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in fam.make_layer(gen).items()}
    cache = {"state": fam.random_state(gen, (2,), torch.float32).cuda()}
    for name, shape in fam.ring_shapes(R).items():
        cache[name] = torch.randn(2, *shape, generator=gen).to(fam.ring_dtypes(act)[name]).cuda()
    cur = {"hist": torch.zeros(2, dtype=torch.int32, device="cuda"),
           "start": torch.zeros(2, dtype=torch.int32, device="cuda"),
           "flush": torch.zeros(2, dtype=torch.int8, device="cuda")}
    tok = {n: v[0].cuda() for n, v in fam.make_tokens(gen, (1, 2 * T), act).items()}
    cu = torch.tensor([0, T, 2 * T], dtype=torch.int32, device="cuda")
    slots = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    out = torch.full((2 * T, geo.H, geo.P), float("nan"), dtype=act, device="cuda")
    return (lambda: fam.spec_verify(tok, layer, cu, slots, cur, cache, out, T, None)), cache, out


def _assert_launch_fails_cleanly(call, cache, out, message):
    before = {k: v.clone() for k, v in cache.items()}
    with pytest.raises(RuntimeError, match=message):
        call()
    torch.cuda.synchronize()
    assert torch.isnan(out.float()).all(), "a failed launch wrote outputs"
    for k in cache:
        assert same_bytes(cache[k], before[k]), f"a failed launch wrote {k}"


# --- lockstep with the CPU op ------------------------------------------------------------------

@spec_only
@pytest.mark.parametrize("T", [2, 8])
@pytest.mark.parametrize("state,act", [("fp32", "bf16"), ("bf16", "fp32"), ("fp16", "fp16")])
def test_spec_lockstep_with_cpu(state, act, T, spec_heads):
    """The same spec-verify / commit / flush sequence on CPU and CUDA (varlen windows, random
    accepted lengths): ring x / B entries and cursors identical, ring dt, outputs and checkpoints
    equal to rounding. The CUDA cache is a 16-byte-aligned paged view."""
    geo, Bcap, rows, num_slots, steps = ODD, 8, 6, 9, 40
    R = Bcap + T + 1
    sd, ad = DTYPES[state], DTYPES[act]
    gen = torch.Generator().manual_seed(17 + T)
    fam, layer, lay_gpu, cpu, cuda, cur_cpu, cur_gpu, row_slot, assert_page_padding_untouched = _lockstep_setup(
        geo, num_slots, rows, R, sd, ad, gen)
    flushes = 0
    for k in range(steps):
        live = [k >= r and torch.rand((), generator=gen).item() > 0.15 for r in range(rows)]  # staggered
        slots = torch.tensor([row_slot[r] if live[r] else -1 for r in range(rows)], dtype=torch.int32)
        ns = torch.randint(1, T + 1, (rows,), generator=gen).tolist()
        cu = torch.tensor([0] + torch.cumsum(torch.tensor(ns), 0).tolist(), dtype=torch.int32)
        toks = fam.make_tokens(gen, (rows, T), ad)
        tok = {n: torch.cat([v[r, :ns[r]] for r in range(rows)]) for n, v in toks.items()}
        flushes += sum(int(cur_cpu["flush"][s]) for s, lv in zip(slots.tolist(), live) if lv)
        out_c = torch.full((int(cu[-1]), geo.H, geo.P), float("nan"), dtype=ad)
        out_g = out_c.cuda()
        fam.spec_verify(tok, layer, cu, slots, cur_cpu, cpu, out_c, T, None)
        fam.spec_verify({n: v.cuda() for n, v in tok.items()}, lay_gpu, cu.cuda(), slots.cuda(), cur_gpu, cuda, out_g,
                        T, None)
        tok_live = torch.cat([torch.full((ns[r],), live[r]) for r in range(rows)])
        assert torch.isnan(out_g[~tok_live.cuda()].float()).all(), f"step {k}: a padding row's output was written"
        assert _rel_err(out_g[tok_live.cuda()], out_c[tok_live]) <= _rounding_bound(ad, geo.N), f"step {k}: outputs"
        for name in ("ring_x", "ring_B"):
            assert same_bytes(cuda[name], cpu[name]), f"step {k}: {name} differs from the CPU op's"
        assert _rel_err(cuda["ring_dt"], cpu["ring_dt"]) <= 4 * torch.finfo(torch.float32).eps, f"step {k}: ring_dt"
        assert _rel_err(cuda["state"], cpu["state"]) <= _rounding_bound(sd, geo.N), f"step {k}: checkpoints differ"
        # Keep the two checkpoints and ring dts identical so later steps compare one step's rounding.
        cuda["state"].copy_(cpu["state"])
        cuda["ring_dt"].copy_(cpu["ring_dt"])
        if k % 11 == 10:  # fold on demand on half the rows, then reset them
            fold = torch.tensor(row_slot[::2] + [-1], dtype=torch.int32)
            fam.flush(layer, fold, cur_cpu, cpu, None)
            fam.flush(lay_gpu, fold.cuda(), cur_gpu, cuda, None)
            assert _rel_err(cuda["state"], cpu["state"]) <= _rounding_bound(sd, geo.N), f"step {k}: fold"
            cuda["state"].copy_(cpu["state"])
            for c in (cur_cpu, cur_gpu):
                torch.ops.replayssm.reset(fold.to(c["hist"].device), c["hist"], c["start"], c["flush"], Bcap, T)
        accepted = torch.tensor([int(torch.randint(1, n + 1, (), generator=gen)) for n in ns], dtype=torch.int32)
        for c in (cur_cpu, cur_gpu):
            torch.ops.replayssm.commit(slots.to(c["hist"].device), accepted.to(c["hist"].device), c["hist"],
                                       c["start"], c["flush"], Bcap, T, R)
        for name in cur_cpu:
            assert torch.equal(cur_gpu[name].cpu(), cur_cpu[name]), f"step {k}: cursor {name} differs"
    assert_page_padding_untouched()
    assert flushes >= rows, "test setup: too few flush steps"


# --- CUDA graphs -------------------------------------------------------------------------------

@spec_only
@pytest.mark.parametrize("T", [2, 4])
def test_spec_cuda_graph_replay_matches_eager(T, spec_heads):
    """One spec-verify step (fixed windows, varlen rows) captured over a batch in mixed phases and
    replayed through more than two flush cycles with commit of random accepted lengths (outside the
    graph) between replays; eager execution of the same sequence on a copy of the caches gives
    bit-identical outputs, rings and checkpoints."""
    geo, Bcap, num_slots = ODD, 8, 8
    R = Bcap + T
    gen = torch.Generator().manual_seed(31 + T)
    fam = Mamba2(geo)
    layer = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in fam.make_layer(gen).items()}
    cache = {"state": fam.random_state(gen, (num_slots,), torch.float32).cuda()}
    for name, shape in fam.ring_shapes(R).items():
        cache[name] = torch.randn(num_slots, *shape, generator=gen).to(fam.ring_dtypes(torch.bfloat16)[name]).cuda()
    cur = {"hist": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
           "start": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
           "flush": torch.zeros(num_slots, dtype=torch.int8, device="cuda")}
    slots = torch.tensor([5, 0, -1, 3, 7, 1], dtype=torch.int32, device="cuda")
    rows = slots.numel()
    ns = [T, 1, T, max(1, T - 1), T, 1]
    cu = torch.tensor([0] + torch.cumsum(torch.tensor(ns), 0).tolist(), dtype=torch.int32, device="cuda")
    L = sum(ns)
    live = slots[slots >= 0]
    # Mixed phases: slot i has committed i % (Bcap - T + 2) single-token steps before the capture.
    one = torch.ones(1, dtype=torch.int32, device="cuda")
    for i, s in enumerate(live.tolist()):
        for _ in range(i % (Bcap - T + 2)):
            torch.ops.replayssm.commit(torch.tensor([s], dtype=torch.int32, device="cuda"), one, cur["hist"],
                                       cur["start"], cur["flush"], Bcap, T, R)
    assert len(set(cur["hist"][live].tolist())) > 2, "test setup: phases not mixed"
    eager_cache = {k: v.clone() for k, v in cache.items()}
    eager_cur = {k: v.clone() for k, v in cur.items()}

    steps = 3 * (Bcap - T + 2)
    toks = [{n: v[0].cuda() for n, v in fam.make_tokens(gen, (1, L), torch.bfloat16).items()} for _ in range(steps)]
    accepted = [torch.tensor([int(torch.randint(1, n + 1, (), generator=gen)) for n in ns], dtype=torch.int32,
                             device="cuda") for _ in range(steps)]
    static_tok = {n: v.clone() for n, v in toks[0].items()}
    static_out = torch.full((L, geo.H, geo.P), float("nan"), dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        snap = {k: v.clone() for k, v in cache.items()}
        with torch.cuda.graph(graph, stream=stream):
            fam.spec_verify(static_tok, layer, cu, slots, cur, cache, static_out, T, None)
    torch.cuda.current_stream().wait_stream(stream)
    for k in snap:
        assert same_bytes(cache[k], snap[k]), "capturing wrote the caches"

    flush_steps = 0
    for k in range(steps):
        flush_steps += int(cur["flush"][live].sum())
        for n in static_tok:
            static_tok[n].copy_(toks[k][n])
        static_out.fill_(float("nan"))
        graph.replay()
        eager_out = torch.full_like(static_out, float("nan"))
        fam.spec_verify(toks[k], layer, cu, slots, eager_cur, eager_cache, eager_out, T, None)
        assert same_bytes(static_out, eager_out), f"replay {k}: outputs differ from eager"
        for name in cache:
            assert same_bytes(cache[name], eager_cache[name]), f"replay {k}: {name} differs from eager"
        for c in (cur, eager_cur):
            torch.ops.replayssm.commit(slots, accepted[k], c["hist"], c["start"], c["flush"], Bcap, T, R)
        assert torch.equal(cur["hist"], eager_cur["hist"]) and torch.equal(cur["start"], eager_cur["start"])
    assert flush_steps >= 2 * len(live), "test setup: fewer than two flushes per row"
    pad = slice(int(cu[2]), int(cu[3]))
    assert torch.isnan(static_out[pad].float()).all(), "padding row written"


# --- validation: the same message as the CPU op ------------------------------------------------

# Each case: an edit of `a`, the valid mamba2_spec_verify arguments of helpers.valid_args by name.
_SPEC_BAD_CASES = {
    "spec_dt_tokens": "a['dt'] = a['dt'][:-1]",
    "spec_cu_seqlens_dtype": "a['cu_seqlens'] = a['cu_seqlens'].long()",
    "spec_cu_seqlens_shape": "a['cu_seqlens'] = a['cu_seqlens'][:-1]",
    "spec_cu_seqlens_not_contiguous": "a['cu_seqlens'] = torch.stack([a['cu_seqlens']] * 2, 1)[:, 0]",
    "spec_ring_B_shape": "a['ring_B'] = a['ring_B'][:, :, :-1]",
    "spec_flush_dtype": "a['flush'] = a['flush'].int()",
    "spec_state_dtype": "a['state'] = a['state'].double()",
    "spec_out_shape": "a['out'] = a['out'][:-1]",
    "spec_max_tokens_zero": "a['max_tokens'] = 0",
    "spec_null_slot_negative": "a['null_slot'] = -2",
}


def _spec_first_error_line(device, case):
    a = valid_args("mamba2_spec_verify", device)
    exec(_SPEC_BAD_CASES[case])
    try:
        call_op("mamba2_spec_verify", a)
    except RuntimeError as e:
        return "RAISED:" + str(e).splitlines()[0]
    return "NOT RAISED"


@pytest.fixture(scope="module")
def spec_bad_input_messages():
    return error_lines_per_device("test_mamba2_cuda", list(_SPEC_BAD_CASES))


@spec_only
@pytest.mark.parametrize("case", list(_SPEC_BAD_CASES))
def test_spec_bad_inputs_same_message(case, spec_bad_input_messages):
    cpu, cuda = spec_bad_input_messages["cpu"][case], spec_bad_input_messages["cuda"][case]
    assert cpu.startswith("RAISED:mamba2_spec_verify: "), f"cpu: {cpu}"
    assert cuda == cpu, f"cuda: {cuda}\ncpu:  {cpu}"


@spec_only
def test_spec_valid_call_runs_on_both():
    """The unedited arguments of the bad-input cases are valid on both devices (so every case above
    fails for its edit alone)."""
    for device in ("cpu", "cuda"):
        call_op("mamba2_spec_verify", valid_args("mamba2_spec_verify", device))
    torch.cuda.synchronize()


@spec_only
def test_spec_cuda_limits():
    """What only the CUDA kernels limit: T <= 8 (the CPU op takes any T the ring fits)."""
    a = valid_args("mamba2_spec_verify", "cuda")
    a["max_tokens"] = 9
    with pytest.raises(RuntimeError, match=r"^mamba2_spec_verify: max_tokens must be <= 8 on CUDA, got max_tokens=9"):
        call_op("mamba2_spec_verify", a)
    b = valid_args("mamba2_spec_verify", "cpu")
    b["max_tokens"] = 9
    call_op("mamba2_spec_verify", b)


@spec_only
def test_spec_heads_override_errors(monkeypatch):
    """REPLAYSSM_M2_SPEC_HEADS: pairs of heads need an even number of heads per group, four heads the
    tensor-core stream and a multiple of 4 heads per group, and only 1, 2 or 4 are values; each error
    names the variable and the launch writes nothing."""
    call, cache, out = _two_row_spec(Mamba2Geo(H=3, P=16, N=16, G=1), torch.bfloat16, T=2, R=8, seed=5)
    for value, message in (("2", "REPLAYSSM_M2_SPEC_HEADS=2 needs an even number of heads per group"),
                           ("3", "REPLAYSSM_M2_SPEC_HEADS must be 1, 2 or 4"),
                           ("4", "REPLAYSSM_M2_SPEC_HEADS=4 runs on the tensor-core state stream only")):
        monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", value)
        _assert_launch_fails_cleanly(call, cache, out, message)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", "1")
    call()
    torch.cuda.synchronize()
    assert not torch.isnan(out.float()).any(), "one head per CTA runs for any grouping"
    # The tensor-core stream (fp32 checkpoint, bf16, T = 8) with two heads per group.
    call, cache, out = _two_row_spec(ODD, torch.bfloat16, T=8, R=16, seed=6)
    monkeypatch.setenv("REPLAYSSM_M2_SPEC_HEADS", "4")
    _assert_launch_fails_cleanly(call, cache, out, "REPLAYSSM_M2_SPEC_HEADS=4 needs a number of heads per group "
                                                   r"\(nheads / ngroups\) divisible by 4")


@spec_only
def test_spec_grid_limit_rows():
    """More rows than the spec kernel's grid takes (65535 in its z extent): the op names the row
    count and writes nothing (padding rows, one token each)."""
    rows = 65536
    args = valid_args("mamba2_spec_verify", device="cuda")
    H, P, G, N = args["x"].shape[1], args["x"].shape[2], args["B"].shape[1], args["B"].shape[2]
    act = args["x"].dtype
    args.update(x=torch.randn(rows, H, P, device="cuda").to(act), dt=torch.randn(rows, H, device="cuda").to(act),
                B=torch.randn(rows, G, N, device="cuda").to(act), C=torch.randn(rows, G, N, device="cuda").to(act),
                z=torch.randn(rows, H, P, device="cuda").to(act), out=torch.full((rows, H, P), 7.0, device="cuda").to(act),
                slots=torch.full((rows,), -1, dtype=torch.int32, device="cuda"),
                cu_seqlens=torch.arange(rows + 1, dtype=torch.int32, device="cuda"))
    before = {k: v.clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(RuntimeError, match="mamba2_spec_verify: slots: the CUDA kernel takes at most 65535 rows, got 65536"):
        call_op("mamba2_spec_verify", args)
    torch.cuda.synchronize()
    for k, v in before.items():
        assert torch.equal(args[k], v), f"{k} was written"


@pytest.mark.parametrize("op", ["mamba2_decode", "mamba2_flush", "mamba2_state_update"])
def test_grid_limit_rows(op):
    """More rows than the decode, flush and classic kernels' grid takes (65535 in its z extent, since
    the grid became (P chunks, H, batch)): the op names the row count and writes nothing (padding
    rows; the classic step in its plain form, one token per row)."""
    rows = 65536
    args = valid_args(op, device="cuda")
    if op == "mamba2_state_update":
        args.update(cu_seqlens=None, snapshot_slots=None)
    if "x" in args:
        H, P, G, N = args["x"].shape[1], args["x"].shape[2], args["B"].shape[1], args["B"].shape[2]
        act = args["x"].dtype
        args.update(x=torch.randn(rows, H, P, device="cuda").to(act), dt=torch.randn(rows, H, device="cuda").to(act),
                    B=torch.randn(rows, G, N, device="cuda").to(act), C=torch.randn(rows, G, N, device="cuda").to(act),
                    z=torch.randn(rows, H, P, device="cuda").to(act),
                    out=torch.full((rows, H, P), 7.0, device="cuda").to(act))
    args["slots"] = torch.full((rows,), -1, dtype=torch.int32, device="cuda")
    before = {k: v.clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(RuntimeError, match=f"{op}: slots: the CUDA kernel takes at most 65535 rows, got 65536"):
        call_op(op, args)
    torch.cuda.synchronize()
    for k, v in before.items():
        assert torch.equal(args[k], v), f"{k} was written"
