"""Thin Python wrappers over ``torch.ops.replayssm.*``.

Each wrapper calls its op once; the only work done here is allocating ``out`` when the caller
passes none (``torch.empty``: rows of padding slots are then left uninitialised, pass a zeroed
``out`` if they must be defined) and picking the tensors out of the cache / cursor objects. The
math, the validation and the cursor rules live in the ops; docs/contract.md states them.

Two forms, as keyword arguments of the same function:

- convenient: ``cache=`` a :class:`~replayssm_ext.cache.Mamba2Cache` / ``GDNCache`` and
  ``cursors=`` a :class:`~replayssm_ext.cache.Cursors` (their ring lengths are checked to agree:
  the ring index is ``(start + j) % R`` in both ``commit`` and the kernels);
- raw: the cache tensors (``state, ring_x, ring_B, ring_dt`` / ``state, ring_u, ring_k, ring_g``)
  and cursor tensors (``hist, start, flush``; ``max_tokens`` for spec verify) by name.

Dims: ``batch`` rows (one sequence each), ``tokens`` = total tokens of a varlen call, ``slots``
cache slots, ``R`` ring length, ``T`` max tokens per row. Mamba-2 ``H, P, N, G``; GDN ``H, HV,
K, V`` (docs/contract.md, "Symbols"). ``act`` = bf16, fp16 or fp32, one per call.

On the GPU the kernels are launched with programmatic dependent launch: a kernel may be scheduled
while the kernel before it in the stream still runs (its launch latency then overlaps that kernel,
which matters at small batch, eagerly and in CUDA graphs alike), and it waits for that kernel to
complete before it touches memory, so results and ordering are those of plain stream order. Two
launches go without it, measured to lose with it: the per-draft snapshot state updates
(``*_state_update`` with ``snapshot_slots``) and ``mamba2_spec_verify`` at batch 1.
``REPLAYSSM_PDL`` (read at every launch) overrides: ``0`` no launch has it, ``1`` every launch
has it; docs/contract.md, "Launch overrides".
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from .cache import Cursors, GDNCache, Mamba2Cache

__all__ = [
    "commit", "reset",
    "mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "mamba2_state_update",
    "gdn_decode", "gdn_spec_verify", "gdn_flush", "gdn_state_update",
]

_MAMBA2_CACHE_NAMES = ("state", "ring_x", "ring_B", "ring_dt")
_GDN_CACHE_NAMES = ("state", "ring_u", "ring_k", "ring_g")


def _from_object_or_raw(op: str, what: str, obj, obj_cls, names, raw) -> tuple:
    """Tensors `names` taken from `obj` (an `obj_cls`) or from the raw keyword tensors, never both."""
    if obj is not None:
        if not isinstance(obj, obj_cls):
            raise TypeError(f"{op}: {what} must be a {obj_cls.__name__}, got {type(obj).__name__}")
        given = [n for n, t in zip(names, raw) if t is not None]
        if given:
            raise TypeError(f"{op}: pass either {what}= or the raw tensors ({', '.join(names)}), "
                            f"not both; got {what}= and {', '.join(given)}")
        return tuple(getattr(obj, n) for n in names)
    missing = [n for n, t in zip(names, raw) if t is None]
    if missing:
        raise TypeError(f"{op}: pass {what}= (a {obj_cls.__name__}) or all of {', '.join(names)}; "
                        f"missing {', '.join(missing)}")
    return tuple(raw)


def _check_same_ring(op: str, cache, cursors) -> None:
    if cache is not None and cursors is not None and cache.ring_len != cursors.ring_len:
        raise ValueError(f"{op}: the cache's ring length (R={cache.ring_len}, ring tensors dim 2) must equal "
                         f"cursors.ring_len ({cursors.ring_len})")


def _max_tokens(op: str, cursors, max_tokens) -> int:
    if cursors is None:
        if max_tokens is None:
            raise TypeError(f"{op}: pass cursors= (a Cursors) or max_tokens= with the raw cursor tensors")
        return max_tokens
    if max_tokens is not None and max_tokens != cursors.max_tokens:
        raise ValueError(f"{op}: max_tokens ({max_tokens}) must equal cursors.max_tokens ({cursors.max_tokens}) "
                         f"when both are given")
    return cursors.max_tokens


def _new_out(like: torch.Tensor) -> torch.Tensor:
    # Contiguous, whatever the strides of `like` (which may be a slice of a projection output).
    return torch.empty(like.shape, dtype=like.dtype, device=like.device)


# --------------------------------------------------------------------------------------------
# Cursors
# --------------------------------------------------------------------------------------------

def commit(cursors: Cursors, slots: torch.Tensor, accepted: torch.Tensor, null_slot: Optional[int] = None) -> None:
    """Advances the cursors once per model step, after every SSM layer ran and acceptance is known.

    Args:
        cursors: the model's :class:`Cursors` (mutated: ``hist``, ``start``, ``flush``).
        slots: int32 ``(batch,)``, the rows' slots (-1 or ``null_slot`` = padding, skipped).
        accepted: int32 ``(batch,)``, tokens accepted per row, in ``1..T``.

    A flush slot's window becomes its history (``start += hist; hist = accepted``), otherwise
    ``hist += accepted``; then ``flush = hist + 2T > B + T``. See docs/contract.md, "Cursors".
    """
    cursors.commit(slots, accepted, null_slot)


def reset(cursors: Cursors, slots: torch.Tensor, null_slot: Optional[int] = None) -> None:
    """Empties the history of ``slots`` (int32 ``(batch,)``): ``hist = start = flush = 0``.

    Call after prefill wrote the checkpoint, or after ``*_flush`` folded every layer. Mutates
    ``cursors``. See docs/contract.md, "Cursors".
    """
    cursors.reset(slots, null_slot)


# --------------------------------------------------------------------------------------------
# Mamba-2
# --------------------------------------------------------------------------------------------

def mamba2_decode(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, *,
                  slots: torch.Tensor, cache: Optional[Mamba2Cache] = None, cursors: Optional[Cursors] = None,
                  D: Optional[torch.Tensor] = None, z: Optional[torch.Tensor] = None,
                  dt_bias: Optional[torch.Tensor] = None, dt_softplus: bool = True,
                  out: Optional[torch.Tensor] = None, route: str = "output_only", null_slot: Optional[int] = None,
                  state=None, ring_x=None, ring_B=None, ring_dt=None, hist=None, start=None, flush=None
                  ) -> torch.Tensor:
    """One ReplaySSM Mamba-2 decode step (one token per row) for one layer.

    Args:
        x: ``(batch, H, P)`` act; dt: ``(batch, H)`` act (raw, before bias / softplus);
        A: ``(H,)`` fp32 (negative); B, C: ``(batch, G, N)`` act; z: ``(batch, H, P)`` act or None;
        D, dt_bias: ``(H,)`` fp32 or None; dt_softplus: apply ``softplus20`` to ``dt + dt_bias``.
        slots: int32 ``(batch,)``; -1 or ``null_slot`` marks padding rows (they write nothing).
            The CUDA kernel takes at most 65535 rows and 65535 heads ``H`` (its grid's y and z
            extents).
        cache / cursors: the layer's :class:`Mamba2Cache` and the model's :class:`Cursors` (or the
            raw tensors by name).
        out: ``(batch, H, P)`` act, allocated when None.
        route: ``"output_only"`` (non-flush rows never form the state) or ``"state_and_output"``.

    Mutates: ``state`` (rows with ``flush`` set: the history is folded into the checkpoint first),
    the rings (the new entry at logical ``hist``), ``out``. Cursors are only read; call
    :func:`commit` after all layers. See docs/contract.md, "Ops".

    On the output-only route with an fp32 checkpoint and a 16-byte aligned ``state`` view, where
    each CTA streams a whole head (all but the smallest batches), the rows that do not flush stream
    their state before their history entries' terms are formed, so the entries' loads overlap the
    stream; ``REPLAYSSM_M2_DECODE_STREAM_FIRST`` (``0`` or ``1``, read at every launch) forces
    either order for measurements and tests, with bit-identical results, and ``1`` raises with a
    2-byte checkpoint, on a ``state`` view off the 16-byte grid, on the state-and-output route and
    in :func:`mamba2_flush`. With an fp32 checkpoint, every other launch on a 16-byte aligned
    ``state`` view (the state-and-output route, flush rows, the small batches) takes an instance
    compiled for aligned views, and a view off that grid one that tests alignment at run time:
    both give bit-identical results. On the state-and-output route with bf16 activations, ``N`` =
    128 and such a view, a launch whose ring holds more than 16 entries (``B`` >= 16 at ``T`` = 1),
    or at the small batches that split a head into single 16-row tiles, forms the state on tensor
    cores (``B_j`` exact, fp32 accumulation): a flush row folds with each fp32 left factor
    ``s_j x_j`` as three bf16 terms (equal to the CUDA-core update up to rounding); a row that does
    not flush, whose formed state is read only for its output, with two (each product to about 16
    significant bits, below the output's bf16 rounding);
    ``REPLAYSSM_M2_DECODE_MMA`` (``0`` or ``1``, read at every launch) forces either update, and
    ``1`` raises where the tensor-core update is not built (docs/contract.md, "Launch overrides").
    On sm_90 devices the tensor-core update runs nine CTAs per SM where nine fit by shared memory
    (``B`` = 16, the small batches) and eight otherwise, bit-identical either way;
    ``REPLAYSSM_M2_DECODE_MMA_NINE`` (``0`` or ``1``) forces either, and ``1`` raises on a launch
    without the tensor-core update.
    On the output-only route with an fp32 checkpoint, ``N`` = 128, 16-byte aligned ``state`` and
    ring views and a ring of at most 31 entries, at the small batches that split each head into
    chunks of at most 16 rows, the rows form their outputs per warp from registers, their ring
    positions requested beside the cursors, and flushing rows fold there as well (outputs and
    checkpoints equal up to rounding; rings bit-identical); ``REPLAYSSM_M2_DECODE_WARP_ROWS``
    (``0`` or ``1``) forces either kernel.

    Returns ``out``.
    """
    op = "mamba2_decode"
    cache_t = _from_object_or_raw(op, "cache", cache, Mamba2Cache, _MAMBA2_CACHE_NAMES, (state, ring_x, ring_B, ring_dt))
    hist, start, flush = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start", "flush"),
                                             (hist, start, flush))
    _check_same_ring(op, cache, cursors)
    if out is None:
        out = _new_out(x)
    torch.ops.replayssm.mamba2_decode(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, hist, start, flush,
                                      *cache_t, out, route, null_slot)
    return out


def mamba2_spec_verify(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, *,
                       cu_seqlens: torch.Tensor, slots: torch.Tensor, cache: Optional[Mamba2Cache] = None,
                       cursors: Optional[Cursors] = None, D: Optional[torch.Tensor] = None,
                       z: Optional[torch.Tensor] = None, dt_bias: Optional[torch.Tensor] = None,
                       dt_softplus: bool = True, out: Optional[torch.Tensor] = None,
                       null_slot: Optional[int] = None, max_tokens: Optional[int] = None,
                       state=None, ring_x=None, ring_B=None, ring_dt=None, hist=None, start=None, flush=None
                       ) -> torch.Tensor:
    """ReplaySSM Mamba-2 speculative-decoding verify step: a window of ``1..T`` tokens per row.

    Args:
        x: ``(tokens, H, P)`` act; dt: ``(tokens, H)`` act; B, C: ``(tokens, G, N)`` act;
        z: ``(tokens, H, P)`` act or None; A, D, dt_bias: ``(H,)`` fp32 (D, dt_bias optional).
        cu_seqlens: int32 ``(batch + 1,)``: row ``r`` owns tokens ``cu_seqlens[r] .. cu_seqlens[r+1]-1``.
        slots: int32 ``(batch,)``; -1 or ``null_slot`` marks padding rows. The CUDA kernel takes at
            most 65535 rows and 65535 heads ``H`` (its grid's y and z extents) and ``T <= 8``.
        cache / cursors: as in :func:`mamba2_decode`; ``T`` is ``cursors.max_tokens`` (or
            ``max_tokens=`` with raw cursor tensors).
        out: ``(tokens, H, P)`` act, allocated when None.

    Mutates: ``state`` (flush rows fold their history first), the rings (the window at logical
    ``hist .. hist+n-1``), ``out``. Rollback of rejected drafts is :func:`commit` with the accepted
    count: nothing is copied. See docs/contract.md, "Ops".

    On CUDA the kernel streams two heads of a group per CTA at serving batch sizes (even heads per
    group), and four where the state stream runs on tensor cores (below), the heads per group are a
    multiple of 4 and the batch gives three waves of such CTAs; the environment variable
    ``REPLAYSSM_M2_SPEC_HEADS`` (``1``, ``2`` or ``4``, read at every launch) overrides that choice
    for measurements and tests, and raises where the heads per group do not divide so or (``4``) the
    stream is on the CUDA cores. Results agree up to rounding either way.

    Numerics (CUDA): with an fp32 ``state``, bf16 activations, ``T`` in 5..8, dstate ``N`` a multiple
    of 32, headdim ``P`` a multiple of 16 and a 16-byte aligned ``state`` view, the state stream runs
    on tensor cores (bf16 mma with fp32 accumulation): the products of the checkpoint with the
    window's ``C`` take each state value as two bf16 terms (within ~2^-17 relative) against the exact
    bf16 ``C``, far below the bf16 rounding of ``out``; a flush row's fold takes ``s_j x_j`` as three
    bf16 terms (exact) against the exact bf16 ``B_j``, so the checkpoint it writes differs from the
    CUDA-core fold only in the order of its fp32 sums. Every other case uses fp32 FMAs. The variable
    ``REPLAYSSM_M2_SPEC_MMA`` (read at every launch) forces the CUDA cores with ``0`` and the tensor
    cores with ``1``, which raises where they cannot run.

    On the CUDA-core stream with an fp32 ``state``, at batches that give eight waves of CTAs, the
    kernel asks L2 for the state rows two iterations ahead of its loads; ``REPLAYSSM_M2_SPEC_L2`` (a
    count of iterations from ``0`` to ``8``, read at every launch) overrides that lead for
    measurements. It changes only timing; another value, or a lead on the tensor-core stream,
    raises. With an fp32 ``state`` in a 16-byte aligned view and ``T`` in 3..4 (off the tensor
    cores), every launch takes a kernel instance whose stream is compiled for aligned views (no
    per-row test of the alignment); ``REPLAYSSM_M2_SPEC_VEC`` (``0`` or ``1``, read at every launch) forces
    it off or on, and raises where it cannot run. It changes only timing.

    Returns ``out``.
    """
    op = "mamba2_spec_verify"
    cache_t = _from_object_or_raw(op, "cache", cache, Mamba2Cache, _MAMBA2_CACHE_NAMES, (state, ring_x, ring_B, ring_dt))
    hist, start, flush = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start", "flush"),
                                             (hist, start, flush))
    _check_same_ring(op, cache, cursors)
    max_tokens = _max_tokens(op, cursors, max_tokens)
    if out is None:
        out = _new_out(x)
    torch.ops.replayssm.mamba2_spec_verify(x, dt, A, B, C, D, z, dt_bias, dt_softplus, cu_seqlens, slots,
                                           hist, start, flush, *cache_t, out, max_tokens, null_slot)
    return out


def mamba2_flush(A: torch.Tensor, *, slots: torch.Tensor, cache: Optional[Mamba2Cache] = None,
                 cursors: Optional[Cursors] = None, null_slot: Optional[int] = None,
                 state=None, ring_x=None, ring_B=None, ring_dt=None, hist=None, start=None) -> None:
    """Folds the ring history of ``slots`` into the checkpoint of one Mamba-2 layer (fold on demand:
    before a prefix-cache snapshot, a preemption, a hand-off).

    Args:
        A: ``(H,)`` fp32; slots: int32 ``(batch,)`` (-1 or ``null_slot`` = padding; the CUDA
            kernel takes at most 65535 rows and 65535 heads ``H``);
        cache / cursors: as in :func:`mamba2_decode` (raw form: ``state, ring_x, ring_B, ring_dt,
            hist, start``; the ``flush`` flags are not read).

    Mutates ``state`` only; the cursors are untouched: fold every layer, then :func:`reset` the
    slots. See docs/contract.md, "Cursors" (fold on demand). The kernel instance follows the
    ``state`` view's alignment as in :func:`mamba2_decode`, with bit-identical results.
    """
    op = "mamba2_flush"
    state, ring_x, ring_B, ring_dt = _from_object_or_raw(op, "cache", cache, Mamba2Cache, _MAMBA2_CACHE_NAMES,
                                                         (state, ring_x, ring_B, ring_dt))
    hist, start = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start"), (hist, start))
    _check_same_ring(op, cache, cursors)
    torch.ops.replayssm.mamba2_flush(A, slots, hist, start, state, ring_x, ring_B, ring_dt, null_slot)


def mamba2_state_update(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, *,
                        state: Union[torch.Tensor, Mamba2Cache], slots: torch.Tensor,
                        D: Optional[torch.Tensor] = None, z: Optional[torch.Tensor] = None,
                        dt_bias: Optional[torch.Tensor] = None, dt_softplus: bool = True,
                        cu_seqlens: Optional[torch.Tensor] = None, snapshot_slots: Optional[torch.Tensor] = None,
                        out: Optional[torch.Tensor] = None, null_slot: Optional[int] = None) -> torch.Tensor:
    """The classic Mamba-2 step that reads and writes the whole state: the baseline.

    Args:
        x, dt, B, C, z: as in :func:`mamba2_decode` (leading dim ``batch``) or, with
            ``cu_seqlens``, as in :func:`mamba2_spec_verify` (leading dim ``tokens``).
        state: ``(slots, H, P, N)`` fp32 / bf16 / fp16, or a :class:`Mamba2Cache` (its ``state``).
        slots: int32 ``(batch,)``: row ``r`` reads ``state[slots[r]]``. The CUDA kernel takes at
            most 65535 rows and 65535 heads ``H``.
        cu_seqlens: int32 ``(batch + 1,)`` or None (one token per row).
        snapshot_slots: int32 ``(batch, T)``, with ``cu_seqlens`` only: the state after token ``i``
            of row ``r`` goes to ``state[snapshot_slots[r, i]]`` (one snapshot per draft, as vLLM
            does; accepting ``a`` tokens means the next step reads ``snapshot_slots[r, a-1]``).
        out: ``(batch | tokens, H, P)`` act, allocated when None.

    Mutates ``state`` (``state[slots[r]]`` without ``cu_seqlens``, the snapshot slots with it) and
    ``out``. See docs/contract.md, "Ops".

    One token per row with an fp32 state, ``N`` = 128 and a 16-byte aligned ``state`` view, at the
    small batches that split each head into chunks of at most 16 rows, the CUDA step runs on a
    kernel whose warps update four state rows each in registers (no shared memory);
    ``REPLAYSSM_M2_UPDATE_ROWS`` (``0`` or ``1``, read at every launch) forces either kernel, and
    ``1`` raises where the rows kernel cannot run (docs/contract.md, "Launch overrides").

    Returns ``out``.
    """
    if isinstance(state, Mamba2Cache):
        state = state.state
    if out is None:
        out = _new_out(x)
    torch.ops.replayssm.mamba2_state_update(x, dt, A, B, C, D, z, dt_bias, dt_softplus, slots, state, out,
                                            cu_seqlens, snapshot_slots, null_slot)
    return out


# --------------------------------------------------------------------------------------------
# Gated DeltaNet
# --------------------------------------------------------------------------------------------

def _default_scale(q: torch.Tensor, scale: Optional[float]) -> float:
    return q.shape[-1] ** -0.5 if scale is None else scale


def gdn_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
               A_log: torch.Tensor, *, slots: torch.Tensor, cache: Optional[GDNCache] = None,
               cursors: Optional[Cursors] = None, dt_bias: Optional[torch.Tensor] = None,
               scale: Optional[float] = None, qk_l2norm: bool = True, out: Optional[torch.Tensor] = None,
               null_slot: Optional[int] = None,
               state=None, ring_u=None, ring_k=None, ring_g=None, hist=None, start=None, flush=None
               ) -> torch.Tensor:
    """One ReplaySSM Gated DeltaNet decode step (one token per row) for one layer.

    Args:
        q, k: ``(batch, H, K)`` act; v: ``(batch, HV, V)`` act; a, b: ``(batch, HV)`` act
            (raw decay and beta gates); A_log, dt_bias: ``(HV,)`` fp32 (dt_bias optional).
        scale: the query scale, default ``K ** -0.5``; qk_l2norm: L2-normalise q and k.
        slots: int32 ``(batch,)``; -1 or ``null_slot`` marks padding rows (they write nothing).
        cache / cursors: the layer's :class:`GDNCache` and the model's :class:`Cursors` (or the raw
            tensors by name).
        out: ``(batch, HV, V)`` act, allocated when None.

    Mutates: ``state`` (flush rows fold their history first), the rings (``u``, ``k̂``, ``g`` at
    logical ``hist``), ``out``. Cursors are only read; call :func:`commit` after all layers. See
    docs/contract.md, "Ops".

    Returns ``out``.
    """
    op = "gdn_decode"
    cache_t = _from_object_or_raw(op, "cache", cache, GDNCache, _GDN_CACHE_NAMES, (state, ring_u, ring_k, ring_g))
    hist, start, flush = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start", "flush"),
                                             (hist, start, flush))
    _check_same_ring(op, cache, cursors)
    if out is None:
        out = _new_out(v)
    torch.ops.replayssm.gdn_decode(q, k, v, a, b, A_log, dt_bias, _default_scale(q, scale), qk_l2norm, slots,
                                   hist, start, flush, *cache_t, out, null_slot)
    return out


def gdn_spec_verify(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                    A_log: torch.Tensor, *, cu_seqlens: torch.Tensor, slots: torch.Tensor,
                    cache: Optional[GDNCache] = None, cursors: Optional[Cursors] = None,
                    dt_bias: Optional[torch.Tensor] = None, scale: Optional[float] = None, qk_l2norm: bool = True,
                    out: Optional[torch.Tensor] = None, null_slot: Optional[int] = None,
                    max_tokens: Optional[int] = None,
                    state=None, ring_u=None, ring_k=None, ring_g=None, hist=None, start=None, flush=None
                    ) -> torch.Tensor:
    """ReplaySSM Gated DeltaNet speculative-decoding verify step: a window of ``1..T`` tokens per row.

    Args:
        q, k: ``(tokens, H, K)`` act; v: ``(tokens, HV, V)`` act; a, b: ``(tokens, HV)`` act;
        A_log, dt_bias: ``(HV,)`` fp32 (dt_bias optional); scale (default ``K ** -0.5``), qk_l2norm.
        cu_seqlens: int32 ``(batch + 1,)``: row ``r`` owns tokens ``cu_seqlens[r] .. cu_seqlens[r+1]-1``.
        slots: int32 ``(batch,)``; -1 or ``null_slot`` marks padding rows.
        cache / cursors: as in :func:`gdn_decode`; ``T`` is ``cursors.max_tokens`` (or
            ``max_tokens=`` with raw cursor tensors).
        out: ``(tokens, HV, V)`` act, allocated when None.

    Mutates: ``state`` (flush rows fold first), the rings (the window at logical
    ``hist .. hist+n-1``), ``out``. Rollback is :func:`commit` with the accepted count. See
    docs/contract.md, "Ops".

    Numerics (CUDA): with bf16 activations, the products of the checkpoint with the window's
    ``k̂_i`` and ``q̂_i`` run on tensor cores, for an fp32 ``state`` at ``T`` in 3..8 as bf16 mma
    with both operands split into two bf16 terms (three products of the terms), for a bf16
    ``state`` at ``T`` in 2..8 as bf16 mma with the state exact and ``k̂_i`` / ``q̂_i`` split into
    two bf16 terms: each product within ~2^-16 relative, far below the bf16
    rounding of ``out`` and the ring entries; flush rows of either state fold on tensor cores with
    exact bf16 operands and fp32 accumulation. Every other case uses fp32 FMAs. The checkpoint a
    flush writes is the fp32 fold, rounded to the state's dtype.

    On CUDA, with ``T`` up to 4, the kernel streams the two v-heads of a k-head per CTA where
    that fits as many CTAs per SM as one head (serving batch sizes, even ``HV / H``); the
    environment variable ``REPLAYSSM_GDN_SPEC_HEADS`` (``1`` or ``2``, read at every launch)
    overrides that choice for measurements and tests, and ``2`` raises where ``HV / H`` is odd or
    ``T`` exceeds 4 (no pair kernels are built for longer windows). Results agree up to rounding
    either way. With an fp32 ``state``, bf16 activations and ``T`` in 5..8, where the batch gives
    every warp of a CTA a 16-row tile of state rows, the kernel streams the checkpoint through
    registers into the tensor-core products; otherwise through shared-memory stage buffers.
    ``REPLAYSSM_GDN_SPEC_REGS`` (``0`` or ``1``, read at every launch) forces the stage buffers or
    the register stream for measurements and tests, and ``1`` raises where the register stream is
    not built; results agree up to rounding either way. The pairs at ``T`` 3..4 also ask L2 for
    state chunks ahead of their stage copies: two ahead where the device's peak DRAM bandwidth per
    SM is above 30 GB/s (an H200), else one (an H100 SXM). ``REPLAYSSM_GDN_L2`` (a count of chunks
    from 0 to 8) overrides that lead for measurements, with bit-identical results, and raises on a
    launch that takes the register stream.
    The register stream is built twice, bounded for 4 and for 5 CTAs per SM (128 and 96 registers);
    the launcher takes the 5-CTA instance where the grid needs more than four waves of 4 CTAs per SM.
    ``REPLAYSSM_GDN_SPEC_REG_CTAS`` (4 or 5, read at every launch) forces one for measurements and
    tests, with results that agree up to rounding; it raises where the launch does not take the
    register stream.
    ``REPLAYSSM_GDN_SPEC_TILES`` (a count from 1 to 8, read at every launch) overrides how many
    tiles of rows, one CTA each, every v-head's state is split into at small batch, for
    measurements and tests; results agree up to rounding with any tiling.

    Returns ``out``.
    """
    op = "gdn_spec_verify"
    cache_t = _from_object_or_raw(op, "cache", cache, GDNCache, _GDN_CACHE_NAMES, (state, ring_u, ring_k, ring_g))
    hist, start, flush = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start", "flush"),
                                             (hist, start, flush))
    _check_same_ring(op, cache, cursors)
    max_tokens = _max_tokens(op, cursors, max_tokens)
    if out is None:
        out = _new_out(v)
    torch.ops.replayssm.gdn_spec_verify(q, k, v, a, b, A_log, dt_bias, _default_scale(q, scale), qk_l2norm,
                                        cu_seqlens, slots, hist, start, flush, *cache_t, out, max_tokens,
                                        null_slot)
    return out


def gdn_flush(*, slots: torch.Tensor, cache: Optional[GDNCache] = None, cursors: Optional[Cursors] = None,
              null_slot: Optional[int] = None,
              state=None, ring_u=None, ring_k=None, ring_g=None, hist=None, start=None) -> None:
    """Folds the ring history of ``slots`` into the checkpoint of one GDN layer (fold on demand).

    Args:
        slots: int32 ``(batch,)`` (-1 or ``null_slot`` = padding);
        cache / cursors: as in :func:`gdn_decode` (raw form: ``state, ring_u, ring_k, ring_g,
            hist, start``; the ``flush`` flags are not read).

    Mutates ``state`` only; the cursors are untouched: fold every layer, then :func:`reset` the
    slots. See docs/contract.md, "Cursors" (fold on demand).
    """
    op = "gdn_flush"
    state, ring_u, ring_k, ring_g = _from_object_or_raw(op, "cache", cache, GDNCache, _GDN_CACHE_NAMES,
                                                        (state, ring_u, ring_k, ring_g))
    hist, start = _from_object_or_raw(op, "cursors", cursors, Cursors, ("hist", "start"), (hist, start))
    _check_same_ring(op, cache, cursors)
    torch.ops.replayssm.gdn_flush(slots, hist, start, state, ring_u, ring_k, ring_g, null_slot)


def gdn_state_update(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                     A_log: torch.Tensor, *, state: Union[torch.Tensor, GDNCache], slots: torch.Tensor,
                     dt_bias: Optional[torch.Tensor] = None, scale: Optional[float] = None, qk_l2norm: bool = True,
                     cu_seqlens: Optional[torch.Tensor] = None, snapshot_slots: Optional[torch.Tensor] = None,
                     out: Optional[torch.Tensor] = None, null_slot: Optional[int] = None) -> torch.Tensor:
    """The classic GDN step that reads and writes the whole state: the baseline.

    Args:
        q, k, v, a, b: as in :func:`gdn_decode` (leading dim ``batch``) or, with ``cu_seqlens``,
            as in :func:`gdn_spec_verify` (leading dim ``tokens``).
        state: ``(slots, HV, V, K)`` fp32 / bf16 / fp16, or a :class:`GDNCache` (its ``state``).
        slots: int32 ``(batch,)``: row ``r`` reads ``state[slots[r]]``.
        cu_seqlens: int32 ``(batch + 1,)`` or None (one token per row).
        snapshot_slots: int32 ``(batch, T)``, with ``cu_seqlens`` only: the state after token ``i``
            of row ``r`` goes to ``state[snapshot_slots[r, i]]`` (one snapshot per draft, as vLLM
            does; accepting ``a`` tokens means the next step reads ``snapshot_slots[r, a-1]``).
        out: ``(batch | tokens, HV, V)`` act, allocated when None.

    Mutates ``state`` (``state[slots[r]]`` without ``cu_seqlens``, the snapshot slots with it) and
    ``out``. See docs/contract.md, "Ops".

    Returns ``out``.
    """
    if isinstance(state, GDNCache):
        state = state.state
    if out is None:
        out = _new_out(v)
    torch.ops.replayssm.gdn_state_update(q, k, v, a, b, A_log, dt_bias, _default_scale(q, scale), qk_l2norm,
                                         slots, state, out, cu_seqlens, snapshot_slots, null_slot)
    return out
