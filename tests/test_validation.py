"""Bad inputs raise RuntimeError("<op>: <argument> must ..., got ...") naming the argument, the
expected and the actual value, and change nothing: every tensor argument is compared byte for
byte with a snapshot taken before the call.

Each case mutates one argument of a valid call (helpers.valid_args). Value checks (slot range,
n, accepted, cursor ranges) read tensor contents and are made on the CPU only (docs/contract.md,
"Validation"); the shape / dtype / device / layout cases run on every device with a kernel.
"""

import pytest
import torch

from conftest import cuda_skip_reason
from helpers import SMALL_DIMS, same_bytes, valid_args

I32 = torch.int32


def _set(name, fn):
    def mutate(a, device):
        a[name] = fn(a[name], device)
    return mutate


def _set_many(**fns):
    def mutate(a, device):
        for name, fn in fns.items():
            a[name] = fn(a[name], device)
    return mutate


def _ints(values, dtype=I32):
    return lambda t, device: torch.tensor(values, dtype=dtype, device=device)


def _cast(dtype):
    return lambda t, device: t.to(dtype)


def _noncontig_inner(t, device):
    """Same shape and values, last two dims swapped in memory."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _noncontig_1d(t, device):
    return torch.stack([t, t], -1)[..., 0]


def _resized(*shape):
    return lambda t, device: torch.zeros(*shape, dtype=t.dtype, device=device)


def _to_meta(t, device):
    return t.to("meta")


def _scalar(v):
    return lambda old, device: v


def _hist_at(slot, value):
    def fn(t, device):
        t = t.clone()
        t[slot] = value
        return t
    return fn


D = SMALL_DIMS
S, R = D["slots"], D["R"]
M2D, M2S, M2F, M2U = "mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "mamba2_state_update"
GD, GS, GF, GU = "gdn_decode", "gdn_spec_verify", "gdn_flush", "gdn_state_update"
DEV = "{dev}"  # replaced by the device's name (cpu / cuda:0) in messages

# (id, op, mutation, expected substrings of the message, value check (CPU only))
CASES = [
    # --- dtypes ---
    ("x_dtype", M2D, _set("x", _cast(torch.float64)),
     ["x must have dtype bfloat16 or float16 or float32, got float64"], False),
    ("dt_dtype", M2D, _set("dt", _cast(torch.float32)), ["dt must have the dtype of x (bfloat16), got float32"], False),
    ("A_dtype", M2D, _set("A", _cast(torch.bfloat16)), ["A must have dtype float32, got bfloat16"], False),
    ("D_dtype", M2S, _set("D", _cast(torch.float16)), ["D must have dtype float32, got float16"], False),
    ("z_dtype", M2S, _set("z", _cast(torch.float32)), ["z must have the dtype of x (bfloat16), got float32"], False),
    ("dt_bias_dtype", M2D, _set("dt_bias", _cast(torch.bfloat16)),
     ["dt_bias must have dtype float32, got bfloat16"], False),
    ("state_dtype", M2D, _set("state", _cast(torch.float64)),
     ["state must have dtype float32 or bfloat16 or float16, got float64"], False),
    ("ring_x_dtype", M2D, _set("ring_x", _cast(torch.float16)),
     ["ring_x must have the dtype of x (bfloat16), got float16"], False),
    ("ring_dt_dtype", M2S, _set("ring_dt", _cast(torch.bfloat16)), ["ring_dt must have dtype float32, got bfloat16"],
     False),
    ("out_dtype", M2D, _set("out", _cast(torch.float32)), ["out must have the dtype of x (bfloat16), got float32"],
     False),
    ("slots_dtype", M2D, _set("slots", _cast(torch.int64)), ["slots must have dtype int32, got int64"], False),
    ("hist_dtype", M2S, _set("hist", _cast(torch.int64)), ["hist must have dtype int32, got int64"], False),
    ("flush_dtype", M2D, _set("flush", _cast(torch.int32)), ["flush must have dtype int8, got int32"], False),
    ("cu_seqlens_dtype", M2S, _set("cu_seqlens", _cast(torch.int64)), ["cu_seqlens must have dtype int32, got int64"],
     False),
    ("q_dtype", GD, _set("q", _cast(torch.float64)), ["q must have dtype bfloat16 or float16 or float32, got float64"],
     False),
    ("v_dtype", GS, _set("v", _cast(torch.float16)), ["v must have the dtype of q (bfloat16), got float16"], False),
    ("A_log_dtype", GD, _set("A_log", _cast(torch.bfloat16)), ["A_log must have dtype float32, got bfloat16"], False),
    ("ring_g_dtype", GD, _set("ring_g", _cast(torch.float16)), ["ring_g must have dtype float32, got float16"], False),
    ("ring_k_dtype", GF, _set("ring_k", _cast(torch.float32)),
     ["ring_k must have the dtype of ring_u (bfloat16), got float32"], False),
    ("gdn_state_dtype", GU, _set("state", _cast(torch.int32)),
     ["state must have dtype float32 or bfloat16 or float16, got int32"], False),
    ("snapshot_dtype", M2U, _set("snapshot_slots", _cast(torch.int64)),
     ["snapshot_slots must have dtype int32, got int64"], False),
    ("accepted_dtype", "commit", _set("accepted", _cast(torch.int64)), ["accepted must have dtype int32, got int64"],
     False),
    ("reset_flush_dtype", "reset", _set("flush", _cast(torch.int32)), ["flush must have dtype int8, got int32"],
     False),

    # --- shapes ---
    ("ring_x_shape", M2D, _set("ring_x", _resized(S, 4, R, 4)),
     [f"ring_x must have shape (slots, H=4, R, P=8), got ({S}, 4, {R}, 4)"], False),
    ("ring_B_R", M2S, _set("ring_B", _resized(S, 2, R - 1, 8)),
     [f"ring_B must have shape (slots={S}, G=2, R={R}, N=8), got ({S}, 2, {R - 1}, 8)"], False),
    ("ring_dt_slots", M2D, _set("ring_dt", _resized(S + 1, 4, R)),
     [f"ring_dt must have shape (slots={S}, H=4, R={R}), got ({S + 1}, 4, {R})"], False),
    ("state_shape", M2D, _set("state", _resized(S, 4, 8, 4)),
     [f"state must have shape (slots={S}, H=4, P=8, N=8), got ({S}, 4, 8, 4)"], False),
    ("groups_not_dividing", M2D, _set_many(B=_resized(3, 3, 8), C=_resized(3, 3, 8)),
     ["H=4 must be a multiple of G=3"], False),
    ("C_shape", M2D, _set("C", _resized(3, 2, 4)), ["C must have shape (batch=3, G=2, N=8), got (3, 2, 4)"], False),
    ("out_rows", M2D, _set("out", _resized(2, 4, 8)), ["out must have shape (batch=3, H=4, P=8), got (2, 4, 8)"],
     False),
    ("slots_rows", M2D, _set("slots", _ints([3, 1])), ["slots must have shape (batch=3), got (2)"], False),
    ("hist_slots", M2S, _set("hist", _ints([0, 0, 0, 0])), [f"hist must have shape (slots={S}), got (4)"], False),
    ("cu_seqlens_shape", M2S, _set("cu_seqlens", _ints([0, 2, 4])),
     ["cu_seqlens must have shape (batch+1=4), got (3)"], False),
    ("A_shape", M2F, _set("A", _resized(3)), [f"ring_x must have shape (slots, H=3, R, P), got ({S}, 4, {R}, 8)"],
     False),
    ("v_heads_not_multiple", GD, _set_many(v=_resized(3, 3, 8), a=_resized(3, 3), b=_resized(3, 3)),
     ["HV=3 must be a multiple of H=2"], False),
    ("ring_k_shape", GS, _set("ring_k", _resized(S, 2, R, 4)),
     [f"ring_k must have shape (slots={S}, H=2, R={R}, K={D['K']}), got ({S}, 2, {R}, 4)"], False),
    ("gdn_state_shape", GD, _set("state", _resized(S, 4, 4, 8)),
     [f"state must have shape (slots={S}, HV=4, V={D['V']}, K={D['K']}), got ({S}, 4, 4, 8)"], False),
    ("gdn_out_shape", GU, _set("out", _resized(4, 4, 4)), [f"out must have shape (tokens=4, HV=4, V={D['V']}), got (4, 4, 4)"],
     False),
    ("snapshot_shape", GU, _set("snapshot_slots", _ints([[3, 0], [1, 2]])),
     ["snapshot_slots must have shape (batch=3, T), got (2, 2)"], False),
    ("accepted_shape", "commit", _set("accepted", _ints([1, 1])), ["accepted must have shape (batch=3), got (2)"],
     False),
    ("start_shape", "reset", _set("start", _ints([0] * (S + 1))), [f"start must have shape (slots={S}), got ({S + 1})"],
     False),

    # --- layout: inner dims contiguous (dim 0 may be strided), 1-d tensors dense ---
    ("x_inner", M2D, _set("x", _noncontig_inner), ["x must be contiguous in every dim after dim 0",
                                                   "dim 2 stride 1 expected, got 4"], False),
    ("ring_x_inner", M2S, _set("ring_x", _noncontig_inner), ["ring_x must be contiguous in every dim after dim 0"],
     False),
    ("state_inner", M2F, _set("state", _noncontig_inner), ["state must be contiguous in every dim after dim 0"],
     False),
    ("A_strided", M2D, _set("A", _noncontig_1d), ["A must be contiguous"], False),
    ("ring_u_inner", GD, _set("ring_u", _noncontig_inner), ["ring_u must be contiguous in every dim after dim 0"],
     False),
    ("k_inner", GS, _set("k", _noncontig_inner), ["k must be contiguous in every dim after dim 0"], False),
    ("hist_strided", "commit", _set("hist", _noncontig_1d), ["hist must be contiguous"], False),

    # --- devices (a second device: meta) ---
    ("state_device", M2D, _set("state", _to_meta), [f"state must be on {DEV}, got meta"], False),
    ("ring_k_device", GS, _set("ring_k", _to_meta), [f"ring_k must be on {DEV}, got meta"], False),
    ("accepted_device", "commit", _set("accepted", _to_meta), [f"accepted must be on {DEV}, got meta"], False),

    # --- scalars ---
    ("route", M2D, _set("route", _scalar("fast")), ['route must be "output_only" or "state_and_output", got "fast"'],
     False),
    ("null_slot_negative", GD, _set("null_slot", _scalar(-3)), ["null_slot must be >= 0 when given, got -3"], False),
    ("max_tokens_zero", M2S, _set("max_tokens", _scalar(0)), ["max_tokens must be >= 1, got 0"], False),
    ("B_less_than_T", "commit", _set("hist_capacity", _scalar(1)),
     ["hist_capacity (B) must be >= max_tokens (T), got B=1, T=2"], False),
    ("reset_B_less_than_T", "reset", _set("max_tokens", _scalar(5)),
     ["hist_capacity (B) must be >= max_tokens (T), got B=4, T=5"], False),
    ("R_too_small", "commit", _set("ring_len", _scalar(5)),
     ["ring_len (R) must be >= hist_capacity + max_tokens = 6, got 5"], False),

    # --- values (CPU only) ---
    ("slot_too_large", M2D, _set("slots", _ints([3, S, -1])),
     [f"slots[1] must be in [0, {S}) or a padding id (-1), got {S}"], True),
    ("slot_negative", GD, _set("slots", _ints([3, -2, -1])),
     [f"slots[1] must be in [0, {S}) or a padding id (-1), got -2"], True),
    ("slot_duplicate", M2S, _set("slots", _ints([3, 3, -1])),
     ["slots must be distinct among live rows, slot 3 appears at rows 0 and 1"], True),
    ("flush_slot_range", GF, _set("slots", _ints([3, 9, -1])),
     [f"slots[1] must be in [0, {S}) or a padding id (-1), got 9"], True),
    ("commit_slot_range", "commit", _set("slots", _ints([3, 7, -1])),
     [f"slots[1] must be in [0, {S}) or a padding id (-1), got 7"], True),
    ("reset_slot_range", "reset", _set("slots", _ints([-5, 1, -1])),
     [f"slots[0] must be in [0, {S}) or a padding id (-1), got -5"], True),
    ("n_above_T", M2S, _set("cu_seqlens", _ints([0, 3, 4, 4])),
     ["row 0 has n=3 tokens (cu_seqlens[1] - cu_seqlens[0]), which must be in [1, max_tokens=2]"], True),
    ("n_zero", GS, _set("cu_seqlens", _ints([0, 0, 2, 4])),
     ["row 0 has n=0 tokens (cu_seqlens[1] - cu_seqlens[0]), which must be in [1, max_tokens=2]"], True),
    ("cu_seqlens_total", M2S, _set("cu_seqlens", _ints([0, 2, 3, 3])),
     ["cu_seqlens[3] must equal the number of tokens (4), got 3"], True),
    ("cu_seqlens_first", GS, _set("cu_seqlens", _ints([1, 2, 3, 4])), ["cu_seqlens[0] must be 0, got 1"], True),
    ("window_past_ring", M2S, _set("hist", _hist_at(3, R - 1)),
     [f"row 0: hist[3] + n = {R - 1} + 2 must be <= R={R}"], True),
    ("start_out_of_ring", M2D, _set("start", _hist_at(3, R)), [f"start[3] must be in [0, R={R}), got {R}"], True),
    ("hist_negative", GF, _set("hist", _hist_at(1, -1)), ["hist[1] must be >= 0, got -1"], True),
    ("accepted_zero", "commit", _set("accepted", _ints([0, 1, 0])),
     ["accepted[0] must be in [1, max_tokens=2], got 0"], True),
    ("accepted_above_T", "commit", _set("accepted", _ints([2, 3, 0])),
     ["accepted[1] must be in [1, max_tokens=2], got 3"], True),
    ("snapshot_without_cu", M2U, _set("cu_seqlens", _scalar(None)),
     ["snapshot_slots is given without cu_seqlens"], False),
    ("cu_without_snapshot", GU, _set("snapshot_slots", _scalar(None)),
     ["cu_seqlens requires snapshot_slots"], False),
    ("snapshot_range", M2U, _set("snapshot_slots", _ints([[3, 9], [1, 2], [-1, -1]])),
     [f"snapshot_slots[0, 1] must be in [0, {S}) or a padding id (-1), got 9"], True),
    ("snapshot_reads_other_row", GU, _set("snapshot_slots", _ints([[3, 1], [1, 2], [-1, -1]])),
     ["snapshot_slots[0, 1] = 1 is the slot row 1 reads"], True),
    ("state_update_n_above_T", GU, _set("cu_seqlens", _ints([0, 3, 4, 4])),
     ["row 0 has n=3 tokens", "which must be in [1, T (dim 1 of snapshot_slots)=2]"], True),
]


def _params():
    for case_id, op, mutate, expected, value_check in CASES:
        for device in ("cpu", "cuda"):
            marks = []
            if device == "cuda":
                reason = cuda_skip_reason((op,))
                if value_check:
                    reason = "value checks need a host sync and are CPU only (docs/contract.md)"
                if reason:
                    marks = [pytest.mark.skip(reason=reason)]
            yield pytest.param(op, mutate, expected, device, id=f"{op}-{case_id}-{device}", marks=marks)


def _device_name(device):
    return "cpu" if device == "cpu" else f"cuda:{torch.cuda.current_device()}"


@pytest.mark.parametrize("op,mutate,expected,device", list(_params()))
def test_bad_input_raises_and_changes_nothing(op, mutate, expected, device):
    args = valid_args(op, device=device)
    mutate(args, device)
    before = {n: t.clone() for n, t in args.items() if isinstance(t, torch.Tensor) and t.device.type != "meta"}
    with pytest.raises(RuntimeError) as err:
        getattr(torch.ops.replayssm, op)(*args.values())
    msg = str(err.value)
    assert msg.startswith(f"{op}: "), msg
    for part in expected:
        assert part.replace(DEV, _device_name(device)) in msg, f"expected {part!r} in {msg!r}"
    for name, t in before.items():
        assert same_bytes(args[name], t), f"{op} changed {name} although it raised"


@pytest.mark.parametrize("op", ["commit", "reset", M2D, M2S, M2F, M2U, GD, GS, GF, GU])
def test_valid_call_passes(op):
    """The unmutated call succeeds, so each failure above is due to its one mutation."""
    args = valid_args(op)
    getattr(torch.ops.replayssm, op)(*args.values())


def test_commit_value_error_writes_no_row():
    """A bad accepted value in a later row must not let earlier rows be committed."""
    args = valid_args("commit")
    args["accepted"] = torch.tensor([1, 2, 0], dtype=I32)
    args["slots"] = torch.tensor([3, 1, 0], dtype=I32)
    before = {n: args[n].clone() for n in ("hist", "start", "flush")}
    with pytest.raises(RuntimeError, match=r"accepted\[2\] must be in \[1, max_tokens=2\], got 0"):
        torch.ops.replayssm.commit(*args.values())
    for n, t in before.items():
        assert torch.equal(args[n], t)
