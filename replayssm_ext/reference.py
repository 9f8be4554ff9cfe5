"""Pure-PyTorch reference for replayssm: the ground truth and the replay formulation.

Two independent things live here (docs/contract.md states the math):

1. **Sequential ground truth** (``mamba2_recurrence``, ``gdn_recurrence``): the plain recurrence,
   one token at a time, in a chosen dtype (float64 by default). It knows nothing about rings,
   cursors or checkpoints.
2. **The replay formulation** (``mamba2_decode`` ... ``gdn_state_update``): the ops, step by step,
   with exactly the op schemas' signatures (csrc/bindings.cpp), mutating the ``!`` arguments in
   place. They follow the cursor rules (``cursor_rules``), compute in float32 as the kernels do,
   round outputs to ``out.dtype``, store ring entries in the ring dtypes and checkpoints in the
   state dtype. The CPU ops are these functions behind validation (``_cpu_ops``); they do not
   validate their arguments themselves (except ``route`` and the ``cu_seqlens`` /
   ``snapshot_slots`` pairing).

Precision choices the kernels share: the current token uses its float32 derived values (δ, g, β,
q̂, k̂, u) for its own output, while the ring keeps ``x``, ``B``, ``u``, ``k̂`` rounded to the act
dtype (what later steps replay); a flush row computes its new token's output from the folded
float32 state, before that state is rounded into the checkpoint.

Shapes: Mamba-2 ``x (L, H, P)``, ``dt (L, H)``, ``B``/``C (L, G, N)``, state ``(H, P, N)``, head
``h`` uses group ``h // (H // G)``. GDN ``q``/``k (L, H, K)``, ``v (L, HV, V)``, ``a``/``b (L, HV)``,
state ``(HV, V, K)``, v-head ``hv`` uses k-head ``hv // (HV // H)``.
"""

from typing import List, Optional, Tuple

import torch

from ._validate import Checker, check_snapshot_pairing
from .cursor_rules import ring_index, slot_is_live

F32 = torch.float32

# --------------------------------------------------------------------------------------------
# Per-token derived values (shared by the ground truth and the replay form: they are the
# contract's definitions of the inputs, not part of either formulation).
# --------------------------------------------------------------------------------------------


def softplus20(v: torch.Tensor) -> torch.Tensor:
    """``v`` where ``v > 20``, else ``log1p(exp(v))`` (elementwise, in ``v``'s dtype)."""
    return torch.where(v > 20, v, torch.log1p(torch.exp(v)))


def l2norm(t: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``t / sqrt(sum(t**2, last dim) + eps)`` (in ``t``'s dtype)."""
    return t / torch.sqrt((t * t).sum(-1, keepdim=True) + eps)


def mamba2_delta(dt: torch.Tensor, dt_bias: Optional[torch.Tensor] = None, dt_softplus: bool = True,
                 dtype: torch.dtype = F32) -> torch.Tensor:
    """δ = softplus20(dt + dt_bias) (bias and softplus each optional), computed in ``dtype``.

    dt ``(..., H)`` any float dtype, dt_bias ``(H,)``. Returns ``(..., H)`` in ``dtype``; this is
    what the ring's ``ring_dt`` holds (float32).
    """
    d = dt.to(dtype)
    if dt_bias is not None:
        d = d + dt_bias.to(dtype)
    return softplus20(d) if dt_softplus else d


def gdn_gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: Optional[torch.Tensor] = None,
              dtype: torch.dtype = F32) -> Tuple[torch.Tensor, torch.Tensor]:
    """GDN log decay and write strength: ``g = -exp(A_log) * softplus20(a + dt_bias)``,
    ``β = sigmoid(b)``, both in ``dtype`` (no round trip through ``b``'s dtype).

    a, b ``(..., HV)``; A_log, dt_bias ``(HV,)``. Returns ``(g, beta)``, each ``(..., HV)``.
    """
    av = a.to(dtype)
    if dt_bias is not None:
        av = av + dt_bias.to(dtype)
    g = -torch.exp(A_log.to(dtype)) * softplus20(av)
    beta = torch.sigmoid(b.to(dtype))
    return g, beta


def gdn_qk(q: torch.Tensor, k: torch.Tensor, scale: float, qk_l2norm: bool,
           dtype: torch.dtype = F32) -> Tuple[torch.Tensor, torch.Tensor]:
    """``q̂ = scale * q / ||q||`` and ``k̂ = k / ||k||`` (norms only when ``qk_l2norm``; the norm is
    ``sqrt(sum(.**2) + 1e-6)``), in ``dtype``. q, k ``(..., H, K)``; returns ``(q̂, k̂)`` alike."""
    qf = q.to(dtype)
    kf = k.to(dtype)
    if qk_l2norm:
        qf = l2norm(qf)
        kf = l2norm(kf)
    return qf * scale, kf


def expand_heads(t: torch.Tensor, num_heads: int, dim: int) -> torch.Tensor:
    """Repeats each group (Mamba-2 B/C) or k-head (GDN q/k) along ``dim`` so that head ``h`` sees
    group ``h // (num_heads // groups)``."""
    groups = t.shape[dim]
    return t.repeat_interleave(num_heads // groups, dim=dim)


def _gate(y: torch.Tensor, z: Optional[torch.Tensor]) -> torch.Tensor:
    if z is None:
        return y
    return y * (z * torch.sigmoid(z))


# --------------------------------------------------------------------------------------------
# 1. Sequential ground truth.
# --------------------------------------------------------------------------------------------


def mamba2_recurrence(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=True, state=None,
                      dtype=torch.float64, return_states=False):
    """The Mamba-2 recurrence over one sequence, token by token, in ``dtype``.

    ``S <- exp(A δ) S + δ x Bᵀ``, ``y = S C + D x``, ``y *= z sigmoid(z)`` when z is given.

    Args: x ``(L, H, P)``, dt ``(L, H)`` raw, A ``(H,)``, B/C ``(L, G, N)``, D ``(H,)``,
    z ``(L, H, P)``, dt_bias ``(H,)``, state ``(H, P, N)`` initial state (zeros when None).
    Nothing is mutated.

    Returns ``(y (L, H, P), final_state (H, P, N))`` in ``dtype``, plus ``states (L, H, P, N)``
    (the state after each token) when ``return_states``.
    """
    L, H, P = x.shape
    N = B.shape[-1]
    xs = x.to(dtype)
    delta = mamba2_delta(dt, dt_bias, dt_softplus, dtype)
    Bh = expand_heads(B.to(dtype), H, 1)
    Ch = expand_heads(C.to(dtype), H, 1)
    Af = A.to(dtype)
    S = torch.zeros(H, P, N, dtype=dtype, device=x.device) if state is None else state.to(dtype).clone()
    ys, states = [], []
    for t in range(L):
        d = delta[t]
        S = torch.exp(Af * d)[:, None, None] * S + d[:, None, None] * xs[t][:, :, None] * Bh[t][:, None, :]
        y = (S * Ch[t][:, None, :]).sum(-1)
        if D is not None:
            y = y + D.to(dtype)[:, None] * xs[t]
        ys.append(_gate(y, None if z is None else z[t].to(dtype)))
        if return_states:
            states.append(S.clone())
    y_all = torch.stack(ys) if ys else xs.new_zeros(0, H, P)
    if return_states:
        st = torch.stack(states) if states else xs.new_zeros(0, H, P, N)
        return y_all, S, st
    return y_all, S


def gdn_recurrence(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, state=None, dtype=torch.float64,
                   return_states=False):
    """The gated delta rule over one sequence, token by token, in ``dtype``.

    ``S <- e^g S (I - β k̂ k̂ᵀ) + β v k̂ᵀ``, ``y = S q̂`` with ``S[v][k]`` (K last).

    Args: q, k ``(L, H, K)``, v ``(L, HV, V)``, a, b ``(L, HV)``, A_log ``(HV,)``,
    dt_bias ``(HV,)`` or None, scale float, qk_l2norm bool, state ``(HV, V, K)`` initial state
    (zeros when None). Nothing is mutated.

    Returns ``(y (L, HV, V), final_state (HV, V, K))`` in ``dtype``, plus ``states (L, HV, V, K)``
    when ``return_states``.
    """
    L, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    qh, kh = gdn_qk(q, k, scale, qk_l2norm, dtype)
    qh = expand_heads(qh, HV, 1)
    kh = expand_heads(kh, HV, 1)
    g, beta = gdn_gates(a, b, A_log, dt_bias, dtype)
    vs = v.to(dtype)
    S = torch.zeros(HV, V, K, dtype=dtype, device=q.device) if state is None else state.to(dtype).clone()
    ys, states = [], []
    for t in range(L):
        kt = kh[t]
        # S (I - β k kᵀ) = S - β (S k) kᵀ, applied after the decay.
        S = torch.exp(g[t])[:, None, None] * S
        Sk = (S * kt[:, None, :]).sum(-1)
        S = S - beta[t][:, None, None] * Sk[:, :, None] * kt[:, None, :] \
              + beta[t][:, None, None] * vs[t][:, :, None] * kt[:, None, :]
        ys.append((S * qh[t][:, None, :]).sum(-1))
        if return_states:
            states.append(S.clone())
    y_all = torch.stack(ys) if ys else vs.new_zeros(0, HV, V)
    if return_states:
        st = torch.stack(states) if states else vs.new_zeros(0, HV, V, K)
        return y_all, S, st
    return y_all, S


# --------------------------------------------------------------------------------------------
# 2. The replay formulation: shared pieces (float32, one slot at a time).
# --------------------------------------------------------------------------------------------


def _live_rows(slots: torch.Tensor, num_slots: int, null_slot: Optional[int]) -> List[Tuple[int, int]]:
    """(row, slot) of every live row."""
    return [(r, s) for r, s in enumerate(int(v) for v in slots.tolist())
            if slot_is_live(s, null_slot, num_slots)]


def _row_bounds(cu_seqlens: Optional[torch.Tensor], row: int) -> Tuple[int, int]:
    if cu_seqlens is None:
        return row, row + 1
    return int(cu_seqlens[row]), int(cu_seqlens[row + 1])


def _positions(start: int, first: int, count: int, ring_len: int, device) -> torch.Tensor:
    """Physical ring indices of logical entries ``first .. first+count-1`` (``ring_index``,
    vectorised)."""
    return (start + first + torch.arange(count, device=device)) % ring_len


def _sum_after(v: torch.Tensor) -> torch.Tensor:
    """``Σ_{i>j} v_i`` for every entry j along the last dim, accumulated from the newest entry.
    ``total - cumsum_j`` would give the same in exact arithmetic but cancels: with a history whose
    summed log decay reaches -16 it loses ~eps·|total| per entry, several times the error of the
    sequential recurrence. Kernels accumulate the same suffix sums."""
    rev = v.flip(-1).cumsum(-1).flip(-1)
    return torch.cat([rev[..., 1:], torch.zeros_like(v[..., :1])], dim=-1)


def _mamba2_replay_weights(A: torch.Tensor, deltas: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """For window entries with δ ``(H, w)``: the checkpoint decay ``a = exp(A Δ)`` ``(H,)`` and
    the entry weights ``s_j = δ_j exp(A (Δ - Δ_j))`` ``(H, w)``, Δ_j the inclusive cumsum."""
    after = _sum_after(deltas)
    total = deltas.sum(-1)
    return torch.exp(A * total), deltas * torch.exp(A[:, None] * after)


def _mamba2_fold(S0: torch.Tensor, A: torch.Tensor, xs: torch.Tensor, Bs: torch.Tensor,
                 deltas: torch.Tensor) -> torch.Tensor:
    """The state after the window entries: ``a S0 + Σ_j s_j x_j B_jᵀ``.
    S0 ``(H, P, N)``, xs ``(H, w, P)``, Bs ``(H, w, N)`` (per head), deltas ``(H, w)``; float32."""
    a, s = _mamba2_replay_weights(A, deltas)
    return a[:, None, None] * S0 + torch.einsum("hw,hwp,hwn->hpn", s, xs, Bs)


def _mamba2_step(S: torch.Tensor, A: torch.Tensor, delta: torch.Tensor, x: torch.Tensor,
                 B: torch.Tensor) -> torch.Tensor:
    """One token of the recurrence in float32: ``exp(A δ) S + δ x Bᵀ``. S ``(H, P, N)``,
    δ ``(H,)``, x ``(H, P)``, B ``(H, N)`` per head."""
    return torch.exp(A * delta)[:, None, None] * S + delta[:, None, None] * x[:, :, None] * B[:, None, :]


def _mamba2_output_only(S0, A, xs, Bs, deltas, C):
    """``y = a (S0 C) + Σ_j s_j (B_j·C) x_j`` for the last window entry, without forming a state.
    C ``(H, N)``; returns ``(H, P)``."""
    a, s = _mamba2_replay_weights(A, deltas)
    bc = torch.einsum("hwn,hn->hw", Bs, C)
    return a[:, None] * torch.einsum("hpn,hn->hp", S0, C) + torch.einsum("hw,hwp->hp", s * bc, xs)


def _mamba2_history(ring_x, ring_B, ring_dt, slot: int, start: int, hist: int, H: int):
    """The slot's unfolded history in float32: x ``(H, hist, P)``, B per head ``(H, hist, N)``,
    δ ``(H, hist)``."""
    pos = _positions(start, 0, hist, ring_x.shape[2], ring_x.device)
    xs = ring_x[slot][:, pos].to(F32)
    Bs = expand_heads(ring_B[slot][:, pos].to(F32), H, 0)
    return xs, Bs, ring_dt[slot][:, pos].to(F32)


def _mamba2_finish(y, x, D, z):
    """``y + D x``, then the z gate; x, z ``(H, P)`` float32."""
    if D is not None:
        y = y + D.to(F32)[:, None] * x
    return _gate(y, z)


def _gdn_fold(S0: torch.Tensor, us: torch.Tensor, ks: torch.Tensor, gs: torch.Tensor) -> torch.Tensor:
    """The state after the entries: ``e^{G} S0 + Σ_j e^{G - G_j} u_j k̂_jᵀ`` (G_j the inclusive
    cumsum of g, G its total). S0 ``(HV, V, K)``, us ``(HV, w, V)``, ks ``(HV, w, K)`` (per v-head),
    gs ``(HV, w)``; float32."""
    rho = torch.exp(_sum_after(gs))
    return torch.exp(gs.sum(-1))[:, None, None] * S0 + torch.einsum("hw,hwv,hwk->hvk", rho, us, ks)


def _gdn_history(ring_u, ring_k, ring_g, slot: int, start: int, hist: int, HV: int):
    """The slot's unfolded history in float32: u ``(HV, hist, V)``, k̂ per v-head
    ``(HV, hist, K)``, g ``(HV, hist)``."""
    pos = _positions(start, 0, hist, ring_u.shape[2], ring_u.device)
    us = ring_u[slot][:, pos].to(F32)
    ks = expand_heads(ring_k[slot][:, pos].to(F32), HV, 0)
    return us, ks, ring_g[slot][:, pos].to(F32)


def _cursor(hist, start, flush, slot):
    return int(hist[slot]), int(start[slot]), (bool(flush[slot]) if flush is not None else False)


# --------------------------------------------------------------------------------------------
# 2a. Mamba-2 ops.
# --------------------------------------------------------------------------------------------


def mamba2_decode(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, hist, start, flush, state, ring_x,
                  ring_B, ring_dt, out, route="output_only", null_slot=None):
    """One ReplaySSM Mamba-2 decode step (one token per row), as ``torch.ops.replayssm.mamba2_decode``.

    Per-row inputs: x ``(batch, H, P)``, dt ``(batch, H)`` raw, B/C ``(batch, G, N)``, z
    ``(batch, H, P)`` or None, all act dtype; A, D, dt_bias ``(H,)`` float32. Slot/cursor tensors:
    slots ``(batch,)`` int32, hist/start ``(slots,)`` int32, flush ``(slots,)`` int8 (read only).

    Mutates, for every live row (slot not -1 / ``null_slot``): ``out[r]`` (act), the ring entry at
    logical ``hist[s]`` (``ring_x``, ``ring_B`` act; ``ring_dt`` float32 post-softplus δ), and, on
    flush rows only, ``state[s]`` = the state after the ``hist[s]`` history entries (not the new
    token), in the state dtype. Non-flush rows with ``route="output_only"`` never form the state:
    ``y = a (S0·C) + Σ_j s_j (B_j·C) x_j`` over history + current token;
    ``"state_and_output"`` forms it and reads ``y = S C`` (same math).
    """
    Checker("mamba2_decode").route(route)
    H = x.shape[1]
    R = ring_x.shape[2]
    delta = mamba2_delta(dt, dt_bias, dt_softplus)
    Af = A.to(F32)
    for r, s in _live_rows(slots, state.shape[0], null_slot):
        h, st, fl = _cursor(hist, start, flush, s)
        xs, Bs, ds = _mamba2_history(ring_x, ring_B, ring_dt, s, st, h, H)
        S0 = state[s].to(F32)
        xr = x[r].to(F32)
        Br = expand_heads(B[r].to(F32), H, 0)
        Cr = expand_heads(C[r].to(F32), H, 0)
        if fl:
            S0 = _mamba2_fold(S0, Af, xs, Bs, ds)
            state[s] = S0.to(state.dtype)
            xs, Bs, ds = xs[:, :0], Bs[:, :0], ds[:, :0]
        # The window: the (unfolded) history, then the current token.
        wx = torch.cat([xs, xr[:, None]], 1)
        wB = torch.cat([Bs, Br[:, None]], 1)
        wd = torch.cat([ds, delta[r][:, None]], 1)
        if route == "output_only":
            y = _mamba2_output_only(S0, Af, wx, wB, wd, Cr)
        else:
            y = torch.einsum("hpn,hn->hp", _mamba2_fold(S0, Af, wx, wB, wd), Cr)
        y = _mamba2_finish(y, xr, D, None if z is None else z[r].to(F32))
        out[r] = y.to(out.dtype)
        pos = ring_index(st, h, R)
        ring_x[s, :, pos] = x[r]
        ring_B[s, :, pos] = B[r]
        ring_dt[s, :, pos] = delta[r]


def mamba2_spec_verify(x, dt, A, B, C, D, z, dt_bias, dt_softplus, cu_seqlens, slots, hist, start, flush,
                       state, ring_x, ring_B, ring_dt, out, max_tokens, null_slot=None):
    """One speculative-verify step, as ``torch.ops.replayssm.mamba2_spec_verify``.

    Row ``r`` owns tokens ``cu_seqlens[r] .. cu_seqlens[r+1]-1`` (``n <= max_tokens``) of x
    ``(tokens, H, P)``, dt ``(tokens, H)``, B/C ``(tokens, G, N)``, z; other arguments as in
    ``mamba2_decode``.

    Mutates, per live row: ``out`` at the row's tokens (the sequential outputs from the
    checkpoint over the history, then over the window), the ``n`` window entries in the ring at
    logical ``hist[s] ..``, and, on flush rows, ``state[s]`` = the state after the history. The
    state is formed in float32 and stepped through the window.
    """
    H = x.shape[1]
    R = ring_x.shape[2]
    delta = mamba2_delta(dt, dt_bias, dt_softplus)
    Af = A.to(F32)
    xf = x.to(F32)
    Bh = expand_heads(B.to(F32), H, 1)
    Ch = expand_heads(C.to(F32), H, 1)
    for r, s in _live_rows(slots, state.shape[0], null_slot):
        t0, t1 = _row_bounds(cu_seqlens, r)
        h, st, fl = _cursor(hist, start, flush, s)
        xs, Bs, ds = _mamba2_history(ring_x, ring_B, ring_dt, s, st, h, H)
        S = _mamba2_fold(state[s].to(F32), Af, xs, Bs, ds)
        if fl:
            state[s] = S.to(state.dtype)
        for t in range(t0, t1):
            S = _mamba2_step(S, Af, delta[t], xf[t], Bh[t])
            y = torch.einsum("hpn,hn->hp", S, Ch[t])
            y = _mamba2_finish(y, xf[t], D, None if z is None else z[t].to(F32))
            out[t] = y.to(out.dtype)
        pos = _positions(st, h, t1 - t0, R, ring_x.device)
        ring_x[s][:, pos] = x[t0:t1].transpose(0, 1)
        ring_B[s][:, pos] = B[t0:t1].transpose(0, 1)
        ring_dt[s][:, pos] = delta[t0:t1].transpose(0, 1)


def mamba2_flush(A, slots, hist, start, state, ring_x, ring_B, ring_dt, null_slot=None):
    """Fold on demand, as ``torch.ops.replayssm.mamba2_flush``: for every live slot in ``slots``,
    ``state[s]`` becomes the state after its ``hist[s]`` history entries (state dtype). Cursors
    and rings are not touched (call ``reset`` afterwards)."""
    H = A.shape[0]
    Af = A.to(F32)
    for _, s in _live_rows(slots, state.shape[0], null_slot):
        h, st, _ = _cursor(hist, start, None, s)
        xs, Bs, ds = _mamba2_history(ring_x, ring_B, ring_dt, s, st, h, H)
        state[s] = _mamba2_fold(state[s].to(F32), Af, xs, Bs, ds).to(state.dtype)


def mamba2_state_update(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, state, out, cu_seqlens=None,
                        snapshot_slots=None, null_slot=None):
    """The classic Mamba-2 step (the baseline), as ``torch.ops.replayssm.mamba2_state_update``.

    Without ``cu_seqlens``: one token per row (x ``(batch, H, P)``); reads and writes
    ``state[slots[r]]``. With ``cu_seqlens (batch+1,)`` (x ``(tokens, H, P)``) and
    ``snapshot_slots (batch, T)`` int32: reads ``state[slots[r]]`` and writes the state after
    token ``i`` of row ``r`` to ``state[snapshot_slots[r, i]]`` (skipped when that id is padding).
    Mutates ``out`` at live rows' tokens and those states (state dtype).
    """
    check_snapshot_pairing(Checker("mamba2_state_update"), cu_seqlens, snapshot_slots)
    H = x.shape[1]
    num_slots = state.shape[0]
    delta = mamba2_delta(dt, dt_bias, dt_softplus)
    Af = A.to(F32)
    xf = x.to(F32)
    Bh = expand_heads(B.to(F32), H, 1)
    Ch = expand_heads(C.to(F32), H, 1)
    for r, s in _live_rows(slots, num_slots, null_slot):
        t0, t1 = _row_bounds(cu_seqlens, r)
        S = state[s].to(F32)
        for i, t in enumerate(range(t0, t1)):
            S = _mamba2_step(S, Af, delta[t], xf[t], Bh[t])
            y = torch.einsum("hpn,hn->hp", S, Ch[t])
            out[t] = _mamba2_finish(y, xf[t], D, None if z is None else z[t].to(F32)).to(out.dtype)
            target = s if snapshot_slots is None else int(snapshot_slots[r, i])
            if slot_is_live(target, null_slot, num_slots):
                state[target] = S.to(state.dtype)


# --------------------------------------------------------------------------------------------
# 2b. Gated DeltaNet ops.
# --------------------------------------------------------------------------------------------


def gdn_decode(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, slots, hist, start, flush, state, ring_u,
               ring_k, ring_g, out, null_slot=None):
    """One ReplaySSM GDN decode step (one token per row), as ``torch.ops.replayssm.gdn_decode``.

    Per-row inputs: q, k ``(batch, H, K)``, v ``(batch, HV, V)``, a, b ``(batch, HV)``, act dtype;
    A_log, dt_bias ``(HV,)`` float32. Cursors as in ``mamba2_decode``.

    Per live row: ``S_prev = e^{ΣG} S0 + Σ_j e^{G-G_j} u_j k̂_jᵀ`` over the history,
    ``u = β (v - e^g S_prev k̂)``, ``y = e^g S_prev q̂ + u (k̂·q̂)``. Mutates ``out[r]`` (act), the ring
    entry at logical ``hist[s]`` (``ring_u`` = u act, ``ring_k`` = k̂ act per k-head, ``ring_g`` =
    g float32) and, on flush rows, ``state[s] = S_prev`` (state dtype).
    """
    HV = v.shape[1]
    R = ring_u.shape[2]
    qh, kh = gdn_qk(q, k, scale, qk_l2norm)
    g, beta = gdn_gates(a, b, A_log, dt_bias)
    for r, s in _live_rows(slots, state.shape[0], null_slot):
        h, st, fl = _cursor(hist, start, flush, s)
        us, ks, gs = _gdn_history(ring_u, ring_k, ring_g, s, st, h, HV)
        S_prev = _gdn_fold(state[s].to(F32), us, ks, gs)
        if fl:
            state[s] = S_prev.to(state.dtype)
        qv = expand_heads(qh[r], HV, 0)
        kv = expand_heads(kh[r], HV, 0)
        decay = torch.exp(g[r])
        Sk = torch.einsum("hvk,hk->hv", S_prev, kv)
        Sq = torch.einsum("hvk,hk->hv", S_prev, qv)
        u = beta[r][:, None] * (v[r].to(F32) - decay[:, None] * Sk)
        y = decay[:, None] * Sq + u * (kv * qv).sum(-1)[:, None]
        out[r] = y.to(out.dtype)
        pos = ring_index(st, h, R)
        ring_u[s, :, pos] = u.to(ring_u.dtype)
        ring_k[s, :, pos] = kh[r].to(ring_k.dtype)
        ring_g[s, :, pos] = g[r]


def gdn_spec_verify(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, cu_seqlens, slots, hist, start, flush,
                    state, ring_u, ring_k, ring_g, out, max_tokens, null_slot=None):
    """One speculative-verify step, as ``torch.ops.replayssm.gdn_spec_verify``.

    Row ``r`` owns tokens ``cu_seqlens[r] .. cu_seqlens[r+1]-1`` of q, k ``(tokens, H, K)``,
    v ``(tokens, HV, V)``, a, b ``(tokens, HV)``. Per live row, with ``S_base`` the state after the
    history and G_i the window-local inclusive cumsum of g, the window's updates solve the
    unit-lower-triangular system ``(I + A) U = R``:
    ``A[i,j] = β_i e^{G_i-G_j} k̂_i·k̂_j`` (i > j), ``R[i] = β_i (v_i - e^{G_i} S_base k̂_i)``, and
    ``y_i = e^{G_i} S_base q̂_i + Σ_{j<=i} e^{G_i-G_j} (k̂_j·q̂_i) u_j`` (no sequential state loop).

    Mutates ``out`` at the row's tokens, the window's ring entries at logical ``hist[s] ..``
    (u, k̂, g) and, on flush rows, ``state[s] = S_base`` (state dtype).
    """
    HV = v.shape[1]
    R = ring_u.shape[2]
    qh, kh = gdn_qk(q, k, scale, qk_l2norm)
    g, beta = gdn_gates(a, b, A_log, dt_bias)
    vf = v.to(F32)
    for r, s in _live_rows(slots, state.shape[0], null_slot):
        t0, t1 = _row_bounds(cu_seqlens, r)
        n = t1 - t0
        h, st, fl = _cursor(hist, start, flush, s)
        us, ks, gs = _gdn_history(ring_u, ring_k, ring_g, s, st, h, HV)
        S_base = _gdn_fold(state[s].to(F32), us, ks, gs)
        if fl:
            state[s] = S_base.to(state.dtype)
        # Window tensors, head-major: (HV, n, .).
        qw = expand_heads(qh[t0:t1], HV, 1).transpose(0, 1)
        kw = expand_heads(kh[t0:t1], HV, 1).transpose(0, 1)
        vw = vf[t0:t1].transpose(0, 1)
        bw = beta[t0:t1].transpose(0, 1)
        Gw = g[t0:t1].transpose(0, 1).cumsum(-1)
        diff = Gw[:, :, None] - Gw[:, None, :]  # [h, i, j] = G_i - G_j
        ii = torch.arange(n, device=q.device)
        below = ii[:, None] > ii[None, :]
        on_or_below = ii[:, None] >= ii[None, :]
        # Mask before exp: above the diagonal G_i - G_j >= 0 and may overflow.
        decay_strict = torch.exp(torch.where(below, diff, torch.full_like(diff, float("-inf"))))
        decay_incl = torch.exp(torch.where(on_or_below, diff, torch.full_like(diff, float("-inf"))))
        kk = torch.einsum("hik,hjk->hij", kw, kw)
        A_mat = bw[:, :, None] * decay_strict * kk
        eG = torch.exp(Gw)
        rhs = bw[:, :, None] * (vw - eG[:, :, None] * torch.einsum("hvk,hik->hiv", S_base, kw))
        eye = torch.eye(n, dtype=F32, device=q.device)
        U = torch.linalg.solve_triangular(eye + A_mat, rhs, upper=False, unitriangular=True)
        kq = torch.einsum("hjk,hik->hij", kw, qw)  # [h, i, j] = k̂_j·q̂_i
        y = eG[:, :, None] * torch.einsum("hvk,hik->hiv", S_base, qw) \
            + torch.einsum("hij,hjv->hiv", decay_incl * kq, U)
        out[t0:t1] = y.transpose(0, 1).to(out.dtype)
        pos = _positions(st, h, n, R, ring_u.device)
        ring_u[s][:, pos] = U.to(ring_u.dtype)
        ring_k[s][:, pos] = kh[t0:t1].transpose(0, 1).to(ring_k.dtype)
        ring_g[s][:, pos] = g[t0:t1].transpose(0, 1)


def gdn_flush(slots, hist, start, state, ring_u, ring_k, ring_g, null_slot=None):
    """Fold on demand, as ``torch.ops.replayssm.gdn_flush``: for every live slot in ``slots``,
    ``state[s]`` becomes the state after its ``hist[s]`` history entries (state dtype). Cursors
    and rings are not touched (call ``reset`` afterwards)."""
    HV = ring_u.shape[1]
    for _, s in _live_rows(slots, state.shape[0], null_slot):
        h, st, _ = _cursor(hist, start, None, s)
        us, ks, gs = _gdn_history(ring_u, ring_k, ring_g, s, st, h, HV)
        state[s] = _gdn_fold(state[s].to(F32), us, ks, gs).to(state.dtype)


def gdn_state_update(q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, slots, state, out, cu_seqlens=None,
                     snapshot_slots=None, null_slot=None):
    """The classic GDN step (the baseline), as ``torch.ops.replayssm.gdn_state_update``.

    Without ``cu_seqlens``: one token per row; reads and writes ``state[slots[r]]``. With
    ``cu_seqlens`` and ``snapshot_slots (batch, T)``: reads ``state[slots[r]]`` and writes the state
    after token ``i`` to ``state[snapshot_slots[r, i]]`` (skipped when that id is padding).
    Mutates ``out`` (act) at live rows' tokens and those states (state dtype).
    """
    check_snapshot_pairing(Checker("gdn_state_update"), cu_seqlens, snapshot_slots)
    HV = v.shape[1]
    num_slots = state.shape[0]
    qh, kh = gdn_qk(q, k, scale, qk_l2norm)
    qh = expand_heads(qh, HV, 1)
    kh = expand_heads(kh, HV, 1)
    g, beta = gdn_gates(a, b, A_log, dt_bias)
    vf = v.to(F32)
    for r, s in _live_rows(slots, num_slots, null_slot):
        t0, t1 = _row_bounds(cu_seqlens, r)
        S = state[s].to(F32)
        for i, t in enumerate(range(t0, t1)):
            S = torch.exp(g[t])[:, None, None] * S
            u = beta[t][:, None] * (vf[t] - torch.einsum("hvk,hk->hv", S, kh[t]))
            S = S + u[:, :, None] * kh[t][:, None, :]
            out[t] = torch.einsum("hvk,hk->hv", S, qh[t]).to(out.dtype)
            target = s if snapshot_slots is None else int(snapshot_slots[r, i])
            if slot_is_live(target, null_slot, num_slots):
                state[target] = S.to(state.dtype)
