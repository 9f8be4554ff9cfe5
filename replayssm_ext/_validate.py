"""Argument validation for the Python side of the ops: the CPU implementations and the fake kernels.

Messages follow ``csrc/ops/checks.h`` word for word (``"{op}: {name} must have shape (slots, H=8,
R, P=64), got (4, 8, 20, 32)"``) and failures raise ``RuntimeError``, the type the C++ side raises,
so a test can expect the same error from every backend.

Each op has one ``check_<op>`` function taking the op's arguments plus ``check_values``:

* the shape / dtype / device / contiguity part runs always, and works on meta and fake tensors;
* the value part (slot range, distinct live slots, ``cu_seqlens``, ``hist + n <= R``) reads tensor
  contents, so it runs only when ``check_values`` is true and the tensors are on the CPU.

Everything is checked before anything is written. Order: per-token tensors, per-layer tensors, row
tensors, per-slot tensors (the first ring tensor names ``slots`` and ``R``), the output, then
contiguity, devices, scalar arguments and, last, values.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import torch

ACT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
STATE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ROUTES = ("output_only", "state_and_output")

_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.float64: "float64",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}

# A dim is (name, size); size None accepts any size (kAnySize in checks.h).
Dim = Tuple[str, Optional[int]]


def dtype_name(dtype: torch.dtype) -> str:
    """The dtype's name as checks.h spells it ("other" for dtypes the ops never take)."""
    return _DTYPE_NAMES.get(dtype, "other")


def shape_str(t: torch.Tensor) -> str:
    """``(4, 8, 20, 32)``; a 1-d shape is ``(4)``, as checks.h writes it."""
    return "(" + ", ".join(str(int(s)) for s in t.shape) + ")"


def device_str(t: torch.Tensor) -> str:
    """``cpu`` or ``cuda:0`` (any other device by its torch name)."""
    d = t.device
    if d.type == "cuda":
        return "cuda" if d.index is None else f"cuda:{d.index}"
    return d.type


class Checker:
    """Checks for one op call; every failure raises ``RuntimeError("{op}: ...")``."""

    def __init__(self, op: str):
        self.op = op

    def fail(self, msg: str):
        raise RuntimeError(f"{self.op}: {msg}")

    def dtype(self, name: str, t: torch.Tensor, allowed: Sequence[torch.dtype]):
        if t.dtype not in allowed:
            self.fail(f"{name} must have dtype {' or '.join(dtype_name(a) for a in allowed)}, "
                      f"got {dtype_name(t.dtype)}")

    def same_dtype(self, name: str, t: torch.Tensor, ref_name: str, ref: torch.dtype):
        if t.dtype != ref:
            self.fail(f"{name} must have the dtype of {ref_name} ({dtype_name(ref)}), "
                      f"got {dtype_name(t.dtype)}")

    def shape(self, name: str, t: torch.Tensor, dims: Sequence[Dim]) -> Tuple[int, ...]:
        """Checks ``t``'s shape against named dims and returns its sizes."""
        ok = t.dim() == len(dims) and all(
            size is None or t.shape[i] == size for i, (_, size) in enumerate(dims))
        if not ok:
            expected = ", ".join(n if size is None else f"{n}={size}" for n, size in dims)
            self.fail(f"{name} must have shape ({expected}), got {shape_str(t)}")
        return tuple(t.shape)

    def inner_contiguous(self, name: str, t: torch.Tensor):
        # Dim 0 may have any stride (paged slot views); the inner dims must be densely packed.
        expected = 1
        for i in range(t.dim() - 1, 0, -1):
            if t.shape[i] != 1 and t.stride(i) != expected:
                self.fail(f"{name} must be contiguous in every dim after dim 0 "
                          f"(dim {i} stride {expected} expected, got {t.stride(i)})")
            expected *= t.shape[i]

    def contiguous(self, name: str, t: torch.Tensor):
        if not t.is_contiguous():
            self.fail(f"{name} must be contiguous")

    def same_device(self, name: str, t: torch.Tensor, ref: torch.Tensor):
        if t.device != ref.device:
            self.fail(f"{name} must be on {device_str(ref)}, got {device_str(t)}")

    def positive(self, name: str, v: int):
        if v < 1:
            self.fail(f"{name} must be >= 1, got {v}")

    def null_slot(self, null_slot: Optional[int]) -> int:
        """null_slot as the kernels see it: -1 when none was given."""
        if null_slot is None:
            return -1
        if null_slot < 0:
            self.fail(f"null_slot must be >= 0 when given, got {null_slot}")
        return int(null_slot)

    def divides(self, inner_name: str, inner: int, outer_name: str, outer: int, what: str):
        if inner < 1 or outer % inner != 0:
            self.fail(f"{outer_name}={outer} must be a multiple of {inner_name}={inner} ({what})")

    def route(self, route: str):
        if route not in ROUTES:
            self.fail(f'route must be "output_only" or "state_and_output", got "{route}"')


def _tensors(named: Dict[str, Optional[torch.Tensor]]) -> List[Tuple[str, torch.Tensor]]:
    return [(n, t) for n, t in named.items() if t is not None]


def _on_cpu(*ts: torch.Tensor) -> bool:
    return all(t.device.type == "cpu" for t in ts)


# --------------------------------------------------------------------------------------------
# Value checks (CPU only: they read tensor contents).
# --------------------------------------------------------------------------------------------

def _padding_ids(null_slot: int) -> str:
    return "-1" + (f", {null_slot}" if null_slot >= 0 else "")


def _is_padding(slot: int, null_slot: int) -> bool:
    return slot == -1 or slot == null_slot


def check_slot_values(c: Checker, slots: List[int], num_slots: int, null_slot: int) -> List[bool]:
    """Slot range and distinct live slots (as ``check_slot_values`` in cursor_ops.cpp).
    Returns, per row, whether it is live."""
    seen_at: Dict[int, int] = {}
    live = []
    for r, s in enumerate(slots):
        if _is_padding(s, null_slot):
            live.append(False)
            continue
        if s < 0 or s >= num_slots:
            c.fail(f"slots[{r}] must be in [0, {num_slots}) or a padding id ({_padding_ids(null_slot)}), "
                   f"got {s}")
        if s in seen_at:
            c.fail(f"slots must be distinct among live rows, slot {s} appears at rows {seen_at[s]} and {r}")
        seen_at[s] = r
        live.append(True)
    return live


def check_cu_seqlens_values(c: Checker, cu: List[int], num_tokens: int, live: List[bool],
                            max_tokens: int, max_tokens_name: str) -> List[int]:
    """cu_seqlens starts at 0, never decreases, ends at the token count; a live row holds
    ``1 <= n <= max_tokens`` tokens. Returns n per row."""
    if cu[0] != 0:
        c.fail(f"cu_seqlens[0] must be 0, got {cu[0]}")
    for r in range(len(cu) - 1):
        if cu[r + 1] < cu[r]:
            c.fail(f"cu_seqlens must be non-decreasing, got cu_seqlens[{r}]={cu[r]} > "
                   f"cu_seqlens[{r + 1}]={cu[r + 1]}")
    if cu[-1] != num_tokens:
        c.fail(f"cu_seqlens[{len(cu) - 1}] must equal the number of tokens ({num_tokens}), got {cu[-1]}")
    lengths = [cu[r + 1] - cu[r] for r in range(len(cu) - 1)]
    for r, n in enumerate(lengths):
        if live[r] and not 1 <= n <= max_tokens:
            c.fail(f"row {r} has n={n} tokens (cu_seqlens[{r + 1}] - cu_seqlens[{r}]), which must be in "
                   f"[1, {max_tokens_name}={max_tokens}]")
    return lengths


def check_cursor_values(c: Checker, slots: List[int], live: List[bool], lengths: List[int],
                        hist: torch.Tensor, start: torch.Tensor, ring_len: int):
    """For each live row: ``hist >= 0``, ``0 <= start < R`` and ``hist + n <= R`` (the window
    never wraps onto unfolded history)."""
    for r, s in enumerate(slots):
        if not live[r]:
            continue
        h = int(hist[s])
        st = int(start[s])
        if h < 0:
            c.fail(f"hist[{s}] must be >= 0, got {h}")
        if not 0 <= st < ring_len:
            c.fail(f"start[{s}] must be in [0, R={ring_len}), got {st}")
        if h + lengths[r] > ring_len:
            c.fail(f"row {r}: hist[{s}] + n = {h} + {lengths[r]} must be <= R={ring_len} (the ring length)")


def check_snapshot_values(c: Checker, snapshot_slots: torch.Tensor, slots: List[int], live: List[bool],
                          lengths: List[int], num_slots: int, null_slot: int):
    """The snapshot of token ``i < n`` of a live row goes to ``snapshot_slots[r, i]``: a slot in
    range or a padding id (no snapshot written). Live targets are distinct, and none is a slot
    that another row reads."""
    snaps = snapshot_slots.tolist()
    read_by = {s: r for r, s in enumerate(slots) if live[r]}
    seen_at: Dict[int, Tuple[int, int]] = {}
    for r in range(len(slots)):
        if not live[r]:
            continue
        for i in range(lengths[r]):
            v = snaps[r][i]
            if _is_padding(v, null_slot):
                continue
            if v < 0 or v >= num_slots:
                c.fail(f"snapshot_slots[{r}, {i}] must be in [0, {num_slots}) or a padding id "
                       f"({_padding_ids(null_slot)}), got {v}")
            if v in seen_at:
                r0, i0 = seen_at[v]
                c.fail(f"snapshot_slots must be distinct among live entries, slot {v} appears at "
                       f"[{r0}, {i0}] and [{r}, {i}]")
            if v in read_by and read_by[v] != r:
                c.fail(f"snapshot_slots[{r}, {i}] = {v} is the slot row {read_by[v]} reads; "
                       f"a row must not write a slot another row reads")
            seen_at[v] = (r, i)


def _row_values(c: Checker, slots_t: torch.Tensor, num_slots: int, null_slot: int,
                cu_seqlens: Optional[torch.Tensor], num_tokens: int, max_tokens: int,
                max_tokens_name: str = "max_tokens"):
    slots = [int(s) for s in slots_t.tolist()]
    live = check_slot_values(c, slots, num_slots, null_slot)
    if cu_seqlens is None:
        lengths = [1] * len(slots)
    else:
        lengths = check_cu_seqlens_values(c, [int(v) for v in cu_seqlens.tolist()], num_tokens, live,
                                          max_tokens, max_tokens_name)
    return slots, live, lengths


# --------------------------------------------------------------------------------------------
# Shared pieces.
# --------------------------------------------------------------------------------------------

def _check_cursors(c: Checker, hist, start, flush, num_slots: int):
    c.dtype("hist", hist, (torch.int32,))
    c.shape("hist", hist, [("slots", num_slots)])
    c.dtype("start", start, (torch.int32,))
    c.shape("start", start, [("slots", num_slots)])
    if flush is not None:
        c.dtype("flush", flush, (torch.int8,))
        c.shape("flush", flush, [("slots", num_slots)])


def _check_rows(c: Checker, slots, cu_seqlens, batch: Optional[int]) -> int:
    c.dtype("slots", slots, (torch.int32,))
    (batch,) = c.shape("slots", slots, [("batch", batch)])
    if cu_seqlens is not None:
        c.dtype("cu_seqlens", cu_seqlens, (torch.int32,))
        c.shape("cu_seqlens", cu_seqlens, [("batch+1", batch + 1)])
    return batch


def _check_layout_and_device(c: Checker, ref: torch.Tensor, inner: Dict[str, Optional[torch.Tensor]],
                             dense: Dict[str, Optional[torch.Tensor]]):
    for name, t in _tensors(inner):
        c.inner_contiguous(name, t)
    for name, t in _tensors(dense):
        c.contiguous(name, t)
    for name, t in _tensors({**inner, **dense}):
        c.same_device(name, t, ref)


# --------------------------------------------------------------------------------------------
# Mamba-2.
# --------------------------------------------------------------------------------------------

def _check_mamba2_token_inputs(c: Checker, x, dt, A, B, C, D, z, dt_bias, lead: str):
    c.dtype("x", x, ACT_DTYPES)
    act = x.dtype
    L, H, P = c.shape("x", x, [(lead, None), ("H", None), ("P", None)])
    c.same_dtype("dt", dt, "x", act)
    c.shape("dt", dt, [(lead, L), ("H", H)])
    c.dtype("A", A, (torch.float32,))
    c.shape("A", A, [("H", H)])
    c.same_dtype("B", B, "x", act)
    _, G, N = c.shape("B", B, [(lead, L), ("G", None), ("N", None)])
    c.divides("G", G, "H", H, "heads per group")
    c.same_dtype("C", C, "x", act)
    c.shape("C", C, [(lead, L), ("G", G), ("N", N)])
    if D is not None:
        c.dtype("D", D, (torch.float32,))
        c.shape("D", D, [("H", H)])
    if z is not None:
        c.same_dtype("z", z, "x", act)
        c.shape("z", z, [(lead, L), ("H", H), ("P", P)])
    if dt_bias is not None:
        c.dtype("dt_bias", dt_bias, (torch.float32,))
        c.shape("dt_bias", dt_bias, [("H", H)])
    return L, H, P, G, N


def _check_mamba2_ring(c: Checker, ring_x, ring_B, ring_dt, state, act, act_ref: str, H, P, G, N):
    """Checks the per-slot Mamba-2 caches; P / G / N may be None (then ring_x / ring_B name them)."""
    if act is None:
        c.dtype("ring_x", ring_x, ACT_DTYPES)
        act = ring_x.dtype
    else:
        c.same_dtype("ring_x", ring_x, act_ref, act)
    num_slots, _, R, P = c.shape("ring_x", ring_x, [("slots", None), ("H", H), ("R", None), ("P", P)])
    c.same_dtype("ring_B", ring_B, act_ref, act)
    _, G, _, N = c.shape("ring_B", ring_B, [("slots", num_slots), ("G", G), ("R", R), ("N", N)])
    c.divides("G", G, "H", H, "heads per group")
    c.dtype("ring_dt", ring_dt, (torch.float32,))
    c.shape("ring_dt", ring_dt, [("slots", num_slots), ("H", H), ("R", R)])
    c.dtype("state", state, STATE_DTYPES)
    c.shape("state", state, [("slots", num_slots), ("H", H), ("P", P), ("N", N)])
    return num_slots, R


def _check_mamba2_step(op, x, dt, A, B, C, D, z, dt_bias, cu_seqlens, slots, hist, start, flush,
                       state, ring_x, ring_B, ring_dt, out, max_tokens, null_slot, check_values,
                       route=None):
    c = Checker(op)
    lead = "batch" if cu_seqlens is None else "tokens"
    L, H, P, G, N = _check_mamba2_token_inputs(c, x, dt, A, B, C, D, z, dt_bias, lead)
    _check_rows(c, slots, cu_seqlens, L if cu_seqlens is None else None)
    num_slots, R = _check_mamba2_ring(c, ring_x, ring_B, ring_dt, state, x.dtype, "x", H, P, G, N)
    _check_cursors(c, hist, start, flush, num_slots)
    c.same_dtype("out", out, "x", x.dtype)
    c.shape("out", out, [(lead, L), ("H", H), ("P", P)])
    _check_layout_and_device(
        c, x,
        inner=dict(x=x, dt=dt, B=B, C=C, z=z, out=out, state=state, ring_x=ring_x, ring_B=ring_B,
                   ring_dt=ring_dt),
        dense=dict(A=A, D=D, dt_bias=dt_bias, slots=slots, cu_seqlens=cu_seqlens, hist=hist, start=start,
                   flush=flush))
    if route is not None:
        c.route(route)
    c.positive("max_tokens", max_tokens)
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(x, slots, hist, start):
        rows, live, lengths = _row_values(c, slots, num_slots, null, cu_seqlens, L, max_tokens)
        check_cursor_values(c, rows, live, lengths, hist, start, R)


def check_mamba2_decode(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, hist, start, flush, state,
                        ring_x, ring_B, ring_dt, out, route="output_only", null_slot=None,
                        check_values=True):
    """Validates a ``mamba2_decode`` call (see docs/contract.md); raises RuntimeError."""
    _check_mamba2_step("mamba2_decode", x, dt, A, B, C, D, z, dt_bias, None, slots, hist, start, flush,
                       state, ring_x, ring_B, ring_dt, out, 1, null_slot, check_values, route=route)


def check_mamba2_spec_verify(x, dt, A, B, C, D, z, dt_bias, dt_softplus, cu_seqlens, slots, hist, start,
                             flush, state, ring_x, ring_B, ring_dt, out, max_tokens, null_slot=None,
                             check_values=True):
    """Validates a ``mamba2_spec_verify`` call; raises RuntimeError."""
    _check_mamba2_step("mamba2_spec_verify", x, dt, A, B, C, D, z, dt_bias, cu_seqlens, slots, hist, start,
                       flush, state, ring_x, ring_B, ring_dt, out, max_tokens, null_slot, check_values)


def check_mamba2_flush(A, slots, hist, start, state, ring_x, ring_B, ring_dt, null_slot=None,
                       check_values=True):
    """Validates a ``mamba2_flush`` call; raises RuntimeError."""
    c = Checker("mamba2_flush")
    c.dtype("A", A, (torch.float32,))
    (H,) = c.shape("A", A, [("H", None)])
    _check_rows(c, slots, None, None)
    num_slots, R = _check_mamba2_ring(c, ring_x, ring_B, ring_dt, state, None, "ring_x", H, None, None, None)
    _check_cursors(c, hist, start, None, num_slots)
    _check_layout_and_device(
        c, state,
        inner=dict(state=state, ring_x=ring_x, ring_B=ring_B, ring_dt=ring_dt),
        dense=dict(A=A, slots=slots, hist=hist, start=start))
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(state, slots, hist, start):
        rows = [int(s) for s in slots.tolist()]
        live = check_slot_values(c, rows, num_slots, null)
        check_cursor_values(c, rows, live, [0] * len(rows), hist, start, R)


def check_snapshot_pairing(c: Checker, cu_seqlens, snapshot_slots):
    """``*_state_update``: cu_seqlens and snapshot_slots come together or not at all."""
    if cu_seqlens is None and snapshot_slots is not None:
        c.fail("snapshot_slots is given without cu_seqlens; it is only used by the varlen (spec) form")
    if cu_seqlens is not None and snapshot_slots is None:
        c.fail("cu_seqlens requires snapshot_slots (batch, T): the state after each token is written "
               "to its snapshot slot")


def _check_state_update_rows(c: Checker, slots, cu_seqlens, snapshot_slots, L: int):
    check_snapshot_pairing(c, cu_seqlens, snapshot_slots)
    batch = _check_rows(c, slots, cu_seqlens, L if cu_seqlens is None else None)
    T = 1
    if snapshot_slots is not None:
        c.dtype("snapshot_slots", snapshot_slots, (torch.int32,))
        _, T = c.shape("snapshot_slots", snapshot_slots, [("batch", batch), ("T", None)])
    return T


def _state_update_values(c: Checker, slots, cu_seqlens, snapshot_slots, num_slots, null, L, T):
    rows, live, lengths = _row_values(c, slots, num_slots, null, cu_seqlens, L, T,
                                      "T (dim 1 of snapshot_slots)")
    if snapshot_slots is not None:
        check_snapshot_values(c, snapshot_slots, rows, live, lengths, num_slots, null)


def check_mamba2_state_update(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, state, out,
                              cu_seqlens=None, snapshot_slots=None, null_slot=None, check_values=True):
    """Validates a ``mamba2_state_update`` call; raises RuntimeError."""
    c = Checker("mamba2_state_update")
    lead = "batch" if cu_seqlens is None else "tokens"
    L, H, P, G, N = _check_mamba2_token_inputs(c, x, dt, A, B, C, D, z, dt_bias, lead)
    T = _check_state_update_rows(c, slots, cu_seqlens, snapshot_slots, L)
    c.dtype("state", state, STATE_DTYPES)
    num_slots, *_ = c.shape("state", state, [("slots", None), ("H", H), ("P", P), ("N", N)])
    c.same_dtype("out", out, "x", x.dtype)
    c.shape("out", out, [(lead, L), ("H", H), ("P", P)])
    _check_layout_and_device(
        c, x,
        inner=dict(x=x, dt=dt, B=B, C=C, z=z, out=out, state=state),
        dense=dict(A=A, D=D, dt_bias=dt_bias, slots=slots, cu_seqlens=cu_seqlens,
                   snapshot_slots=snapshot_slots))
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(x, slots):
        _state_update_values(c, slots, cu_seqlens, snapshot_slots, num_slots, null, L, T)


# --------------------------------------------------------------------------------------------
# Gated DeltaNet.
# --------------------------------------------------------------------------------------------

def _check_gdn_token_inputs(c: Checker, q, k, v, a, b, A_log, dt_bias, lead: str):
    c.dtype("q", q, ACT_DTYPES)
    act = q.dtype
    L, H, K = c.shape("q", q, [(lead, None), ("H", None), ("K", None)])
    c.same_dtype("k", k, "q", act)
    c.shape("k", k, [(lead, L), ("H", H), ("K", K)])
    c.same_dtype("v", v, "q", act)
    _, HV, V = c.shape("v", v, [(lead, L), ("HV", None), ("V", None)])
    c.divides("H", H, "HV", HV, "v heads per k head")
    c.same_dtype("a", a, "q", act)
    c.shape("a", a, [(lead, L), ("HV", HV)])
    c.same_dtype("b", b, "q", act)
    c.shape("b", b, [(lead, L), ("HV", HV)])
    c.dtype("A_log", A_log, (torch.float32,))
    c.shape("A_log", A_log, [("HV", HV)])
    if dt_bias is not None:
        c.dtype("dt_bias", dt_bias, (torch.float32,))
        c.shape("dt_bias", dt_bias, [("HV", HV)])
    return L, H, K, HV, V


def _check_gdn_ring(c: Checker, ring_u, ring_k, ring_g, state, act, act_ref: str, H, K, HV, V):
    """Checks the per-slot GDN caches; H / K / HV / V may be None (then ring_u / ring_k name them)."""
    if act is None:
        c.dtype("ring_u", ring_u, ACT_DTYPES)
        act = ring_u.dtype
    else:
        c.same_dtype("ring_u", ring_u, act_ref, act)
    num_slots, HV, R, V = c.shape("ring_u", ring_u, [("slots", None), ("HV", HV), ("R", None), ("V", V)])
    c.same_dtype("ring_k", ring_k, act_ref, act)
    _, H, _, K = c.shape("ring_k", ring_k, [("slots", num_slots), ("H", H), ("R", R), ("K", K)])
    c.divides("H", H, "HV", HV, "v heads per k head")
    c.dtype("ring_g", ring_g, (torch.float32,))
    c.shape("ring_g", ring_g, [("slots", num_slots), ("HV", HV), ("R", R)])
    c.dtype("state", state, STATE_DTYPES)
    c.shape("state", state, [("slots", num_slots), ("HV", HV), ("V", V), ("K", K)])
    return num_slots, R


def _check_gdn_step(op, q, k, v, a, b, A_log, dt_bias, cu_seqlens, slots, hist, start, flush, state,
                    ring_u, ring_k, ring_g, out, max_tokens, null_slot, check_values):
    c = Checker(op)
    lead = "batch" if cu_seqlens is None else "tokens"
    L, H, K, HV, V = _check_gdn_token_inputs(c, q, k, v, a, b, A_log, dt_bias, lead)
    _check_rows(c, slots, cu_seqlens, L if cu_seqlens is None else None)
    num_slots, R = _check_gdn_ring(c, ring_u, ring_k, ring_g, state, q.dtype, "q", H, K, HV, V)
    _check_cursors(c, hist, start, flush, num_slots)
    c.same_dtype("out", out, "q", q.dtype)
    c.shape("out", out, [(lead, L), ("HV", HV), ("V", V)])
    _check_layout_and_device(
        c, q,
        inner=dict(q=q, k=k, v=v, a=a, b=b, out=out, state=state, ring_u=ring_u, ring_k=ring_k,
                   ring_g=ring_g),
        dense=dict(A_log=A_log, dt_bias=dt_bias, slots=slots, cu_seqlens=cu_seqlens, hist=hist,
                   start=start, flush=flush))
    c.positive("max_tokens", max_tokens)
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(q, slots, hist, start):
        rows, live, lengths = _row_values(c, slots, num_slots, null, cu_seqlens, L, max_tokens)
        check_cursor_values(c, rows, live, lengths, hist, start, R)


def check_gdn_decode(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, slots, hist, start, flush, state,
                     ring_u, ring_k, ring_g, out, null_slot=None, check_values=True):
    """Validates a ``gdn_decode`` call; raises RuntimeError."""
    _check_gdn_step("gdn_decode", q, k, v, a, b, A_log, dt_bias, None, slots, hist, start, flush, state,
                    ring_u, ring_k, ring_g, out, 1, null_slot, check_values)


def check_gdn_spec_verify(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, cu_seqlens, slots, hist, start,
                          flush, state, ring_u, ring_k, ring_g, out, max_tokens, null_slot=None,
                          check_values=True):
    """Validates a ``gdn_spec_verify`` call; raises RuntimeError."""
    _check_gdn_step("gdn_spec_verify", q, k, v, a, b, A_log, dt_bias, cu_seqlens, slots, hist, start, flush,
                    state, ring_u, ring_k, ring_g, out, max_tokens, null_slot, check_values)


def check_gdn_flush(slots, hist, start, state, ring_u, ring_k, ring_g, null_slot=None, check_values=True):
    """Validates a ``gdn_flush`` call; raises RuntimeError."""
    c = Checker("gdn_flush")
    _check_rows(c, slots, None, None)
    num_slots, R = _check_gdn_ring(c, ring_u, ring_k, ring_g, state, None, "ring_u", None, None, None, None)
    _check_cursors(c, hist, start, None, num_slots)
    _check_layout_and_device(
        c, state,
        inner=dict(state=state, ring_u=ring_u, ring_k=ring_k, ring_g=ring_g),
        dense=dict(slots=slots, hist=hist, start=start))
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(state, slots, hist, start):
        rows = [int(s) for s in slots.tolist()]
        live = check_slot_values(c, rows, num_slots, null)
        check_cursor_values(c, rows, live, [0] * len(rows), hist, start, R)


def check_gdn_state_update(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, slots, state, out,
                           cu_seqlens=None, snapshot_slots=None, null_slot=None, check_values=True):
    """Validates a ``gdn_state_update`` call; raises RuntimeError."""
    c = Checker("gdn_state_update")
    lead = "batch" if cu_seqlens is None else "tokens"
    L, H, K, HV, V = _check_gdn_token_inputs(c, q, k, v, a, b, A_log, dt_bias, lead)
    T = _check_state_update_rows(c, slots, cu_seqlens, snapshot_slots, L)
    c.dtype("state", state, STATE_DTYPES)
    num_slots, *_ = c.shape("state", state, [("slots", None), ("HV", HV), ("V", V), ("K", K)])
    c.same_dtype("out", out, "q", q.dtype)
    c.shape("out", out, [(lead, L), ("HV", HV), ("V", V)])
    _check_layout_and_device(
        c, q,
        inner=dict(q=q, k=k, v=v, a=a, b=b, out=out, state=state),
        dense=dict(A_log=A_log, dt_bias=dt_bias, slots=slots, cu_seqlens=cu_seqlens,
                   snapshot_slots=snapshot_slots))
    null = c.null_slot(null_slot)
    if check_values and _on_cpu(q, slots):
        _state_update_values(c, slots, cu_seqlens, snapshot_slots, num_slots, null, L, T)


# --------------------------------------------------------------------------------------------
# Cursor ops (their CPU implementation is C++; these are for the fake kernels).
# --------------------------------------------------------------------------------------------

def _check_cursor_args(c: Checker, slots, hist, start, flush, hist_capacity, max_tokens):
    # Same order and wording as check_cursor_args in csrc/ops/cursor_ops.cpp.
    c.dtype("slots", slots, (torch.int32,))
    c.dtype("hist", hist, (torch.int32,))
    c.dtype("start", start, (torch.int32,))
    c.dtype("flush", flush, (torch.int8,))
    c.shape("slots", slots, [("batch", None)])
    (num_slots,) = c.shape("hist", hist, [("slots", None)])
    c.shape("start", start, [("slots", num_slots)])
    c.shape("flush", flush, [("slots", num_slots)])
    for name, t in (("slots", slots), ("hist", hist), ("start", start), ("flush", flush)):
        c.contiguous(name, t)
    c.same_device("slots", slots, hist)
    c.same_device("start", start, hist)
    c.same_device("flush", flush, hist)
    c.positive("max_tokens", max_tokens)
    if hist_capacity < max_tokens:
        c.fail(f"hist_capacity (B) must be >= max_tokens (T), got B={hist_capacity}, T={max_tokens}")
    return slots.shape[0]


def check_commit(slots, accepted, hist, start, flush, hist_capacity, max_tokens, ring_len, null_slot=None):
    """Shape / dtype / device checks of ``commit`` (the same as the C++ op makes)."""
    c = Checker("commit")
    batch = _check_cursor_args(c, slots, hist, start, flush, hist_capacity, max_tokens)
    c.dtype("accepted", accepted, (torch.int32,))
    c.shape("accepted", accepted, [("batch", batch)])
    c.contiguous("accepted", accepted)
    c.same_device("accepted", accepted, hist)
    if ring_len < hist_capacity + max_tokens:
        c.fail(f"ring_len (R) must be >= hist_capacity + max_tokens = {hist_capacity + max_tokens}, "
               f"got {ring_len}")
    c.null_slot(null_slot)


def check_reset(slots, hist, start, flush, hist_capacity, max_tokens, null_slot=None):
    """Shape / dtype / device checks of ``reset`` (the same as the C++ op makes)."""
    c = Checker("reset")
    _check_cursor_args(c, slots, hist, start, flush, hist_capacity, max_tokens)
    c.null_slot(null_slot)
