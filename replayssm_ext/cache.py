"""Cursor and cache objects, model geometries and the concurrency planner.

Layouts and cursor rules are those of docs/contract.md ("Cursors" and "Caches"): one
:class:`Cursors` per model (all SSM layers advance in lock-step), one :class:`Mamba2Cache` or
:class:`GDNCache` per SSM layer. Every per-slot tensor has dim 0 = slot with any stride (so a paged
allocator can hand out strided views) and densely packed inner dims.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Optional, Union

import torch

__all__ = [
    "Mamba2Geometry", "GDNGeometry",
    "NEMOTRON3_NANO_4B", "NEMOTRON3_SUPER", "QWEN35_4B", "QWEN35_122B",
    "Cursors", "Mamba2Cache", "GDNCache",
    "ConcurrencyPlan", "plan_concurrency",
]

# Checkpoint (recurrence) precisions and activation precisions the ops accept.
STATE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ACT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

# Sub-buffer offsets inside one page of allocate_paged: a multiple of every element size, and wide
# enough for the kernels' vector loads.
PAGE_ALIGNMENT_BYTES = 256


# --------------------------------------------------------------------------------------------
# Geometries
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Mamba2Geometry:
    """Shape of one Mamba-2 layer: ``nheads`` (H), ``headdim`` (P), ``dstate`` (N), ``ngroups`` (G).

    Head ``h`` uses B/C group ``h // (H / G)``, so ``H`` must be a multiple of ``G``.
    """

    nheads: int
    headdim: int
    dstate: int
    ngroups: int

    def __post_init__(self):
        for name in ("nheads", "headdim", "dstate", "ngroups"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Mamba2Geometry: {name} must be a positive int, got {value!r}")
        if self.nheads % self.ngroups != 0:
            raise ValueError(
                f"Mamba2Geometry: nheads (H={self.nheads}) must be a multiple of ngroups (G={self.ngroups})")

    # The contract's single-letter names.
    H = property(lambda self: self.nheads)
    P = property(lambda self: self.headdim)
    N = property(lambda self: self.dstate)
    G = property(lambda self: self.ngroups)


@dataclasses.dataclass(frozen=True)
class GDNGeometry:
    """Shape of one Gated DeltaNet layer: ``nheads`` (H, q/k heads), ``nheads_v`` (HV, v heads),
    ``key_dim`` (K) and ``value_dim`` (V).

    v-head ``hv`` uses k-head ``hv // (HV / H)``, so ``HV`` must be a multiple of ``H``.
    """

    nheads: int
    nheads_v: int
    key_dim: int
    value_dim: int

    def __post_init__(self):
        for name in ("nheads", "nheads_v", "key_dim", "value_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GDNGeometry: {name} must be a positive int, got {value!r}")
        if self.nheads_v % self.nheads != 0:
            raise ValueError(
                f"GDNGeometry: nheads_v (HV={self.nheads_v}) must be a multiple of nheads (H={self.nheads})")

    H = property(lambda self: self.nheads)
    HV = property(lambda self: self.nheads_v)
    K = property(lambda self: self.key_dim)
    V = property(lambda self: self.value_dim)


#: Nemotron-3-Nano-4B Mamba-2 layer, (H, P, N, G) = (96, 80, 128, 8).
NEMOTRON3_NANO_4B = Mamba2Geometry(nheads=96, headdim=80, dstate=128, ngroups=8)
#: Nemotron-3-Super Mamba-2 layer, (H, P, N, G) = (128, 64, 128, 8).
NEMOTRON3_SUPER = Mamba2Geometry(nheads=128, headdim=64, dstate=128, ngroups=8)
#: Qwen3.5-4B Gated DeltaNet layer, (H, HV, K, V) = (16, 32, 128, 128).
QWEN35_4B = GDNGeometry(nheads=16, nheads_v=32, key_dim=128, value_dim=128)
#: Qwen3.5-122B Gated DeltaNet layer, (H, HV, K, V) = (16, 64, 128, 128).
QWEN35_122B = GDNGeometry(nheads=16, nheads_v=64, key_dim=128, value_dim=128)


# --------------------------------------------------------------------------------------------
# Small checks shared by the constructors
# --------------------------------------------------------------------------------------------

def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _element_size(dtype: torch.dtype) -> int:
    return dtype.itemsize


def _check_int(owner: str, name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}")


def _check_dtype(owner: str, name: str, dtype: torch.dtype, allowed) -> None:
    if dtype not in allowed:
        names = " or ".join(_dtype_name(d) for d in allowed)
        raise TypeError(f"{owner}: {name} must be {names}, got {_dtype_name(dtype)}")


def _check_ring_geometry(owner: str, hist_capacity: int, max_tokens: int, ring_len: int) -> None:
    """The contract's constraints on B, T and R (see docs/contract.md, "Cursors")."""
    _check_int(owner, "max_tokens (T)", max_tokens, 1)
    _check_int(owner, "hist_capacity (B)", hist_capacity, 1)
    _check_int(owner, "ring_len (R)", ring_len, 1)
    if hist_capacity < max_tokens:
        raise ValueError(
            f"{owner}: hist_capacity (B) must be >= max_tokens (T), got B={hist_capacity}, T={max_tokens}")
    if ring_len < hist_capacity + max_tokens:
        raise ValueError(
            f"{owner}: ring_len (R) must be >= hist_capacity + max_tokens = {hist_capacity + max_tokens}, "
            f"got {ring_len}")


def _check_rank(owner: str, name: str, t, ndim: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{owner}: {name} must have {ndim} dims, got shape {tuple(t.shape)}")


def _check_slot_strides(owner: str, name: str, t: torch.Tensor) -> None:
    """dim 0 (slot) any non-overlapping stride, every inner dim densely packed (row-major); the
    same rule as the ops' check (size-1 dims may have any stride)."""
    expected = 1
    for i in range(t.dim() - 1, 0, -1):
        if t.size(i) != 1 and t.stride(i) != expected:
            raise ValueError(
                f"{owner}: {name} must be contiguous in every dim after dim 0 (dim {i} stride {expected} "
                f"expected, got {t.stride(i)}); shape {tuple(t.shape)}, strides {t.stride()}")
        expected *= t.size(i)
    if t.size(0) > 1 and t.stride(0) < expected:
        raise ValueError(
            f"{owner}: {name} slots overlap: dim 0 stride must be >= {expected} (elements per slot), "
            f"got {t.stride(0)}")


def _ring_len_of(owner: str, **rings) -> int:
    """R, which every ring tensor holds in dim 2; a clear error when they disagree."""
    lengths = {name: t.size(2) for name, t in rings.items()}
    if len(set(lengths.values())) != 1:
        listed = ", ".join(f"{n}={r}" for n, r in lengths.items())
        raise ValueError(f"{owner}: the ring tensors must agree on the ring length R (dim 2), got {listed}")
    return next(iter(lengths.values()))


def _check_dims(owner: str, name: str, t: torch.Tensor, dims) -> None:
    """dims: sequence of (name, expected size); raises naming every dim when one differs."""
    if tuple(t.shape) != tuple(size for _, size in dims):
        expected = ", ".join(f"{n}={s}" for n, s in dims)
        raise ValueError(f"{owner}: {name} must have shape ({expected}), got {tuple(t.shape)}")


def _check_common_device(owner: str, tensors: dict) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    first_name, first = next(iter(devices.items()))
    for name, dev in devices.items():
        if dev != first:
            raise ValueError(f"{owner}: {name} must be on {first} (the device of {first_name}), got {dev}")


def _paged_views(owner: str, num_slots: int, parts, page_bytes: Optional[int], device) -> list:
    """Carves per-slot tensors out of one byte page per slot, like a paged (vLLM-style) cache.

    ``parts`` is a list of (name, inner shape, dtype). Each part starts at a multiple of
    PAGE_ALIGNMENT_BYTES inside the page; the returned views have dim-0 stride = page_bytes /
    element size, so every part's page stride must divide evenly (page_bytes is a multiple of the
    alignment, which every element size divides).
    """
    offsets, offset = [], 0
    for _, inner, dtype in parts:
        offsets.append(offset)
        nbytes = math.prod(inner) * _element_size(dtype)
        offset += -(-nbytes // PAGE_ALIGNMENT_BYTES) * PAGE_ALIGNMENT_BYTES
    needed = offset
    if page_bytes is None:
        page_bytes = needed
    _check_int(owner, "page_bytes", page_bytes, 1)
    if page_bytes < needed:
        raise ValueError(f"{owner}: page_bytes must be >= {needed} (the aligned cache of one slot), got {page_bytes}")
    if page_bytes % PAGE_ALIGNMENT_BYTES != 0:
        raise ValueError(f"{owner}: page_bytes must be a multiple of {PAGE_ALIGNMENT_BYTES}, got {page_bytes}")
    pages = torch.zeros((num_slots, page_bytes), dtype=torch.uint8, device=device)
    views = []
    for (_, inner, dtype), start in zip(parts, offsets):
        nbytes = math.prod(inner) * _element_size(dtype)
        # Byte slice per page -> reinterpret as dtype (last dim contiguous, dim-0 stride divisible)
        # -> split the flat per-slot run into the inner dims.
        views.append(pages[:, start:start + nbytes].view(dtype).view(num_slots, *inner))
    return views


# --------------------------------------------------------------------------------------------
# Cursors
# --------------------------------------------------------------------------------------------

class Cursors:
    """Per-slot ring cursors of one model (shared by all its SSM layers), on the device.

    Args:
        num_slots: number of cache slots (dim 0 of every per-slot tensor).
        hist_capacity: ``B``, the history capacity of the ring (committed, unfolded inputs).
        max_tokens: ``T``, the most tokens one step feeds a row (1 for plain decode, 1 + drafts
            for speculative decoding).
        ring_len: ``R``, the ring tensors' position dim; defaults to ``B + T`` (the minimum).
        device: where the cursor tensors live (the device of the caches).

    Tensors (zero-initialised: every slot starts with an empty history, as after ``reset``):
        ``hist`` int32 ``(num_slots,)``: committed inputs in the ring not yet folded;
        ``start`` int32 ``(num_slots,)``: physical ring index of logical entry 0;
        ``flush`` int8 ``(num_slots,)``: 1 if the next step on that slot folds its history first.

    Steps only read the cursors; :meth:`commit` advances them once per model step after
    acceptance is known, :meth:`reset` empties a slot's history (after prefill or a fold on
    demand). Rules: docs/contract.md, "Cursors".
    """

    #: hist (int32) + start (int32) + flush (int8).
    BYTES_PER_SLOT = 4 + 4 + 1

    def __init__(self, num_slots: int, hist_capacity: int = 16, max_tokens: int = 1,
                 ring_len: Optional[int] = None, device=None):
        _check_int("Cursors", "num_slots", num_slots, 1)
        if ring_len is None:
            ring_len = hist_capacity + max_tokens
        _check_ring_geometry("Cursors", hist_capacity, max_tokens, ring_len)
        self.num_slots = num_slots
        self.hist_capacity = hist_capacity
        self.max_tokens = max_tokens
        self.ring_len = ring_len
        self.hist = torch.zeros(num_slots, dtype=torch.int32, device=device)
        self.start = torch.zeros(num_slots, dtype=torch.int32, device=device)
        self.flush = torch.zeros(num_slots, dtype=torch.int8, device=device)

    @property
    def device(self) -> torch.device:
        """The device of the cursor tensors."""
        return self.hist.device

    def commit(self, slots: torch.Tensor, accepted: torch.Tensor, null_slot: Optional[int] = None) -> None:
        """Advances the cursors of ``slots`` (int32 ``(batch,)``) by ``accepted`` (int32 ``(batch,)``,
        each in ``1..T``) tokens, once per model step after every layer ran. A flush slot's window
        becomes its new history (``start += hist; hist = accepted``), otherwise ``hist += accepted``;
        then ``flush = hist + 2T > B + T``. Padding rows (slot -1 or ``null_slot``) are skipped."""
        torch.ops.replayssm.commit(slots, accepted, self.hist, self.start, self.flush,
                                   self.hist_capacity, self.max_tokens, self.ring_len, null_slot)

    def reset(self, slots: torch.Tensor, null_slot: Optional[int] = None) -> None:
        """Empties the history of ``slots`` (int32 ``(batch,)``): ``hist = start = flush = 0``. Call
        it after prefill wrote the checkpoint, or after ``*_flush`` folded every layer."""
        torch.ops.replayssm.reset(slots, self.hist, self.start, self.flush,
                                  self.hist_capacity, self.max_tokens, null_slot)

    def reset_all(self) -> None:
        """Empties the history of every slot."""
        self.reset(torch.arange(self.num_slots, dtype=torch.int32, device=self.device))

    def bytes_per_slot(self) -> int:
        """Device bytes of the cursors of one slot (once per model, not per layer)."""
        return self.BYTES_PER_SLOT

    def __repr__(self) -> str:
        return (f"Cursors(num_slots={self.num_slots}, hist_capacity={self.hist_capacity}, "
                f"max_tokens={self.max_tokens}, ring_len={self.ring_len}, device={self.device})")


# --------------------------------------------------------------------------------------------
# Caches
# --------------------------------------------------------------------------------------------

class _InstanceOrClassMethod:
    """One name, two forms: ``cache.bytes_per_slot()`` measures the tensors of a cache, and
    ``Mamba2Cache.bytes_per_slot(geometry, ring_len, act_dtype, state_dtype)`` computes the same
    number from a geometry without allocating."""

    def __init__(self, on_instance, on_class):
        self.on_instance, self.on_class = on_instance, on_class
        self.__doc__ = f"{on_instance.__doc__}\n\nOn the class: {on_class.__doc__}"

    def __get__(self, obj, cls):
        if obj is None:
            return types.MethodType(self.on_class, cls)
        return types.MethodType(self.on_instance, obj)


class _LayerCache:
    """What Mamba2Cache and GDNCache share: the four per-slot tensors, their names, byte counts."""

    # Subclasses: the tensor attribute names in op-argument order (checkpoint, two act rings, the
    # fp32 per-head ring last).
    _TENSOR_NAMES: tuple = ()

    def tensors(self) -> tuple:
        """The four per-slot tensors in op-argument order."""
        return tuple(getattr(self, n) for n in self._TENSOR_NAMES)

    @property
    def num_slots(self) -> int:
        """Number of slots (dim 0 of every tensor)."""
        return self.state.size(0)

    @property
    def ring_len(self) -> int:
        """``R``, the ring position dim."""
        return getattr(self, self._TENSOR_NAMES[3]).size(2)

    @property
    def state_dtype(self) -> torch.dtype:
        """dtype of the checkpoint (the recurrence precision)."""
        return self.state.dtype

    @property
    def device(self) -> torch.device:
        """Device of the cache tensors."""
        return self.state.device

    def _instance_bytes_per_slot(self) -> int:
        """Device bytes this layer holds per slot (checkpoint + ring; cursors are per model)."""
        return sum(self.bytes_breakdown().values())

    @classmethod
    def _geometry_bytes_per_slot(cls, geometry, ring_len: int, act_dtype=torch.bfloat16,
                                 state_dtype=torch.float32) -> int:
        """Bytes per slot of a cache of this geometry (checkpoint + ring), without allocating."""
        _check_geometry_args(f"{cls.__name__}.bytes_per_slot", geometry, cls._GEOMETRY_CLS, ring_len,
                             act_dtype, state_dtype)
        return sum(math.prod(inner) * _element_size(dt)
                   for _, inner, dt in cls._parts(geometry, ring_len, act_dtype, state_dtype))

    bytes_per_slot = _InstanceOrClassMethod(_instance_bytes_per_slot, _geometry_bytes_per_slot.__func__)

    def bytes_breakdown(self) -> dict:
        """Bytes per slot of each tensor, by name."""
        return {n: math.prod(t.shape[1:]) * t.element_size()
                for n, t in zip(self._TENSOR_NAMES, self.tensors())}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(slots={self.num_slots}, geometry={self.geometry}, "
                f"ring_len={self.ring_len}, act_dtype={self.act_dtype}, state_dtype={self.state_dtype}, "
                f"device={self.device})")


class Mamba2Cache(_LayerCache):
    """The ReplaySSM cache of one Mamba-2 layer (docs/contract.md, "Caches").

    Tensors (dim 0 = slot, any stride; inner dims contiguous):
        ``state``   ``(slots, H, P, N)`` fp32 / bf16 / fp16: the checkpoint, written only by flush
                    steps and ``mamba2_flush`` (and by prefill, outside this package);
        ``ring_x``  ``(slots, H, R, P)`` act dtype: the ring of inputs ``x``;
        ``ring_B``  ``(slots, G, R, N)`` act dtype: the ring of ``B`` per group;
        ``ring_dt`` ``(slots, H, R)`` fp32: the ring of ``dt`` after bias and softplus.

    ``read_copy`` is ``None``: reserved for a low-precision (fp8 / NVFP4) read copy of the
    checkpoint that non-flush steps could read instead of ``state``; no op uses one yet.

    Build with :meth:`allocate` (dense), :meth:`allocate_paged` (one byte page per slot, for tests of
    paged layouts) or :meth:`from_views` (caller-provided, possibly strided, views).
    """

    _TENSOR_NAMES = ("state", "ring_x", "ring_B", "ring_dt")
    _GEOMETRY_CLS = Mamba2Geometry

    def __init__(self, state: torch.Tensor, ring_x: torch.Tensor, ring_B: torch.Tensor, ring_dt: torch.Tensor):
        """Wraps four tensors after checking them; prefer :meth:`from_views` (same checks)."""
        owner = "Mamba2Cache"
        for name, t, ndim in (("state", state, 4), ("ring_x", ring_x, 4), ("ring_B", ring_B, 4),
                              ("ring_dt", ring_dt, 3)):
            _check_rank(owner, name, t, ndim)
        S, H, P, N = state.shape
        G, R = ring_B.size(1), _ring_len_of(owner, ring_x=ring_x, ring_B=ring_B, ring_dt=ring_dt)
        _check_dims(owner, "ring_x", ring_x, [("slots", S), ("H", H), ("R", R), ("P", P)])
        _check_dims(owner, "ring_B", ring_B, [("slots", S), ("G", G), ("R", R), ("N", N)])
        _check_dims(owner, "ring_dt", ring_dt, [("slots", S), ("H", H), ("R", R)])
        if G < 1 or H % G != 0:
            raise ValueError(f"{owner}: H={H} (state dim 1) must be a multiple of G={G} (ring_B dim 1)")
        for name, t in zip(self._TENSOR_NAMES, (state, ring_x, ring_B, ring_dt)):
            _check_slot_strides(owner, name, t)
        _check_dtype(owner, "state", state.dtype, STATE_DTYPES)
        _check_dtype(owner, "ring_x", ring_x.dtype, ACT_DTYPES)
        if ring_B.dtype != ring_x.dtype:
            raise TypeError(f"{owner}: ring_B must have the dtype of ring_x ({_dtype_name(ring_x.dtype)}), "
                            f"got {_dtype_name(ring_B.dtype)}")
        _check_dtype(owner, "ring_dt", ring_dt.dtype, (torch.float32,))
        _check_common_device(owner, {"state": state, "ring_x": ring_x, "ring_B": ring_B, "ring_dt": ring_dt})
        self.state, self.ring_x, self.ring_B, self.ring_dt = state, ring_x, ring_B, ring_dt
        # Room for a later low-precision read copy of the checkpoint (fp8 e4m3 with scales, or
        # NVFP4) that non-flush steps would read instead of `state`; no op takes one yet.
        self.read_copy = None

    @property
    def act_dtype(self) -> torch.dtype:
        """Activation dtype of the rings (and of the calls' x / B / C)."""
        return self.ring_x.dtype

    @property
    def geometry(self) -> Mamba2Geometry:
        """The layer geometry inferred from the tensors."""
        _, H, P, N = self.state.shape
        return Mamba2Geometry(nheads=H, headdim=P, dstate=N, ngroups=self.ring_B.size(1))

    @classmethod
    def from_views(cls, state, ring_x, ring_B, ring_dt) -> "Mamba2Cache":
        """Wraps caller-provided tensors (e.g. strided views into a paged cache) after checking
        ranks, shapes (geometry inferred from ``state`` and ``ring_B``), dtypes, one device, inner
        contiguity and non-overlapping slots. The tensors are used as they are, not copied."""
        return cls(state, ring_x, ring_B, ring_dt)

    @staticmethod
    def _parts(geometry: Mamba2Geometry, ring_len: int, act_dtype, state_dtype) -> list:
        g = geometry
        return [("state", (g.nheads, g.headdim, g.dstate), state_dtype),
                ("ring_x", (g.nheads, ring_len, g.headdim), act_dtype),
                ("ring_B", (g.ngroups, ring_len, g.dstate), act_dtype),
                ("ring_dt", (g.nheads, ring_len), torch.float32)]

    @classmethod
    def allocate(cls, num_slots: int, nheads: int, headdim: int, dstate: int, ngroups: int, ring_len: int,
                 act_dtype=torch.bfloat16, state_dtype=torch.float32, device=None) -> "Mamba2Cache":
        """Allocates a dense, zero-filled cache of ``num_slots`` slots."""
        geometry = Mamba2Geometry(nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups)
        owner = "Mamba2Cache.allocate"
        _check_int(owner, "num_slots", num_slots, 1)
        _check_geometry_args(owner, geometry, Mamba2Geometry, ring_len, act_dtype, state_dtype)
        return cls(*(torch.zeros((num_slots, *inner), dtype=dt, device=device)
                     for _, inner, dt in cls._parts(geometry, ring_len, act_dtype, state_dtype)))

    @classmethod
    def allocate_paged(cls, num_slots: int, nheads: int, headdim: int, dstate: int, ngroups: int,
                       ring_len: int, act_dtype=torch.bfloat16, state_dtype=torch.float32, device=None,
                       page_bytes: Optional[int] = None) -> "Mamba2Cache":
        """Allocates a zero-filled cache laid out like a paged allocator's: one ``uint8`` page of
        ``page_bytes`` per slot (default: the aligned size of the four tensors; larger pages, as in
        a cache shared with attention, leave a gap), the four tensors carved out of it at
        256-byte-aligned offsets. Each tensor's dim-0 stride is the page size in its elements, so
        the tensors are not contiguous: this exercises the kernels' slot-stride addressing."""
        geometry = Mamba2Geometry(nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups)
        owner = "Mamba2Cache.allocate_paged"
        _check_int(owner, "num_slots", num_slots, 1)
        _check_geometry_args(owner, geometry, Mamba2Geometry, ring_len, act_dtype, state_dtype)
        return cls(*_paged_views(owner, num_slots, cls._parts(geometry, ring_len, act_dtype, state_dtype),
                                 page_bytes, device))


class GDNCache(_LayerCache):
    """The ReplaySSM cache of one Gated DeltaNet layer (docs/contract.md, "Caches").

    Tensors (dim 0 = slot, any stride; inner dims contiguous):
        ``state``  ``(slots, HV, V, K)`` fp32 / bf16 / fp16: the checkpoint ``S[v][k]`` (K
                   contiguous), written only by flush steps and ``gdn_flush`` (and prefill);
        ``ring_u`` ``(slots, HV, R, V)`` act dtype: the ring of delta-corrected values
                   ``u = β (v − e^g S_prev k̂)``;
        ``ring_k`` ``(slots, H, R, K)`` act dtype: the ring of L2-normalised keys ``k̂``;
        ``ring_g`` ``(slots, HV, R)`` fp32: the ring of log decays ``g``.

    ``read_copy`` is ``None``: reserved for a low-precision (fp8 / NVFP4) read copy of the
    checkpoint; no op uses one yet.

    Build with :meth:`allocate`, :meth:`allocate_paged` or :meth:`from_views`.
    """

    _TENSOR_NAMES = ("state", "ring_u", "ring_k", "ring_g")
    _GEOMETRY_CLS = GDNGeometry

    def __init__(self, state: torch.Tensor, ring_u: torch.Tensor, ring_k: torch.Tensor, ring_g: torch.Tensor):
        """Wraps four tensors after checking them; prefer :meth:`from_views` (same checks)."""
        owner = "GDNCache"
        for name, t, ndim in (("state", state, 4), ("ring_u", ring_u, 4), ("ring_k", ring_k, 4),
                              ("ring_g", ring_g, 3)):
            _check_rank(owner, name, t, ndim)
        S, HV, V, K = state.shape
        H, R = ring_k.size(1), _ring_len_of(owner, ring_u=ring_u, ring_k=ring_k, ring_g=ring_g)
        _check_dims(owner, "ring_u", ring_u, [("slots", S), ("HV", HV), ("R", R), ("V", V)])
        _check_dims(owner, "ring_k", ring_k, [("slots", S), ("H", H), ("R", R), ("K", K)])
        _check_dims(owner, "ring_g", ring_g, [("slots", S), ("HV", HV), ("R", R)])
        if H < 1 or HV % H != 0:
            raise ValueError(f"{owner}: HV={HV} (state dim 1) must be a multiple of H={H} (ring_k dim 1)")
        for name, t in zip(self._TENSOR_NAMES, (state, ring_u, ring_k, ring_g)):
            _check_slot_strides(owner, name, t)
        _check_dtype(owner, "state", state.dtype, STATE_DTYPES)
        _check_dtype(owner, "ring_u", ring_u.dtype, ACT_DTYPES)
        if ring_k.dtype != ring_u.dtype:
            raise TypeError(f"{owner}: ring_k must have the dtype of ring_u ({_dtype_name(ring_u.dtype)}), "
                            f"got {_dtype_name(ring_k.dtype)}")
        _check_dtype(owner, "ring_g", ring_g.dtype, (torch.float32,))
        _check_common_device(owner, {"state": state, "ring_u": ring_u, "ring_k": ring_k, "ring_g": ring_g})
        self.state, self.ring_u, self.ring_k, self.ring_g = state, ring_u, ring_k, ring_g
        # Room for a later low-precision read copy of the checkpoint; see Mamba2Cache.
        self.read_copy = None

    @property
    def act_dtype(self) -> torch.dtype:
        """Activation dtype of the rings (and of the calls' q / k / v)."""
        return self.ring_u.dtype

    @property
    def geometry(self) -> GDNGeometry:
        """The layer geometry inferred from the tensors."""
        _, HV, V, K = self.state.shape
        return GDNGeometry(nheads=self.ring_k.size(1), nheads_v=HV, key_dim=K, value_dim=V)

    @classmethod
    def from_views(cls, state, ring_u, ring_k, ring_g) -> "GDNCache":
        """Wraps caller-provided tensors (e.g. strided views into a paged cache) after checking
        ranks, shapes (geometry inferred from ``state`` and ``ring_k``), dtypes, one device, inner
        contiguity and non-overlapping slots. The tensors are used as they are, not copied."""
        return cls(state, ring_u, ring_k, ring_g)

    @staticmethod
    def _parts(geometry: GDNGeometry, ring_len: int, act_dtype, state_dtype) -> list:
        g = geometry
        return [("state", (g.nheads_v, g.value_dim, g.key_dim), state_dtype),
                ("ring_u", (g.nheads_v, ring_len, g.value_dim), act_dtype),
                ("ring_k", (g.nheads, ring_len, g.key_dim), act_dtype),
                ("ring_g", (g.nheads_v, ring_len), torch.float32)]

    @classmethod
    def allocate(cls, num_slots: int, nheads: int, nheads_v: int, key_dim: int, value_dim: int, ring_len: int,
                 act_dtype=torch.bfloat16, state_dtype=torch.float32, device=None) -> "GDNCache":
        """Allocates a dense, zero-filled cache of ``num_slots`` slots."""
        geometry = GDNGeometry(nheads=nheads, nheads_v=nheads_v, key_dim=key_dim, value_dim=value_dim)
        owner = "GDNCache.allocate"
        _check_int(owner, "num_slots", num_slots, 1)
        _check_geometry_args(owner, geometry, GDNGeometry, ring_len, act_dtype, state_dtype)
        return cls(*(torch.zeros((num_slots, *inner), dtype=dt, device=device)
                     for _, inner, dt in cls._parts(geometry, ring_len, act_dtype, state_dtype)))

    @classmethod
    def allocate_paged(cls, num_slots: int, nheads: int, nheads_v: int, key_dim: int, value_dim: int,
                       ring_len: int, act_dtype=torch.bfloat16, state_dtype=torch.float32, device=None,
                       page_bytes: Optional[int] = None) -> "GDNCache":
        """Allocates a zero-filled cache in one ``uint8`` page per slot (see
        :meth:`Mamba2Cache.allocate_paged`): strided views with dim-0 stride = the page size."""
        geometry = GDNGeometry(nheads=nheads, nheads_v=nheads_v, key_dim=key_dim, value_dim=value_dim)
        owner = "GDNCache.allocate_paged"
        _check_int(owner, "num_slots", num_slots, 1)
        _check_geometry_args(owner, geometry, GDNGeometry, ring_len, act_dtype, state_dtype)
        return cls(*_paged_views(owner, num_slots, cls._parts(geometry, ring_len, act_dtype, state_dtype),
                                 page_bytes, device))


def _check_geometry_args(owner, geometry, geometry_cls, ring_len, act_dtype, state_dtype) -> None:
    if not isinstance(geometry, geometry_cls):
        raise TypeError(f"{owner}: geometry must be a {geometry_cls.__name__}, got {type(geometry).__name__}")
    _check_int(owner, "ring_len", ring_len, 1)
    _check_dtype(owner, "act_dtype", act_dtype, ACT_DTYPES)
    _check_dtype(owner, "state_dtype", state_dtype, STATE_DTYPES)


# --------------------------------------------------------------------------------------------
# Concurrency planner
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ConcurrencyPlan:
    """How many sequences fit a memory budget with ReplaySSM vs per-draft state snapshots.

    Byte counts are per sequence, over ``num_layers`` SSM layers (conv state excluded: both
    schemes keep the same one):

    - ``replay_bytes_per_seq = num_layers * (checkpoint + ring of R = B + T entries) + 9``
      (the 9 bytes are the cursors ``hist``/``start``/``flush``, once per model);
    - ``snapshot_bytes_per_seq = num_layers * T * checkpoint``: vLLM's speculative decoding keeps
      one state per window position (``1 + drafts = T`` states per sequence per layer: the step
      reads the state of the last accepted position and writes the state after each of the T
      tokens into those same T blocks). With ``T = 1`` this is plain decoding: one state.

    ``replay_max_seqs`` / ``snapshot_max_seqs`` = ``memory_bytes // bytes_per_seq``;
    With ``T = 1`` ReplaySSM holds slightly more (the ring) than plain decoding; its gain there is
    bandwidth, not capacity. ``ratio = replay_max_seqs / snapshot_max_seqs`` (``inf`` when no snapshot sequence fits but a
    replay one does, ``nan`` when neither fits); ``bytes_ratio`` is the same without rounding.
    """

    family: str
    geometry: Union[Mamba2Geometry, GDNGeometry]
    num_layers: int
    hist_capacity: int
    max_tokens: int
    ring_len: int
    act_dtype: torch.dtype
    state_dtype: torch.dtype
    memory_bytes: int
    checkpoint_bytes_per_layer: int
    ring_bytes_per_layer: int
    cursor_bytes: int
    replay_bytes_per_seq: int
    snapshot_bytes_per_seq: int
    replay_max_seqs: int
    snapshot_max_seqs: int

    @property
    def ratio(self) -> float:
        """Concurrent sequences with ReplaySSM over those with per-draft snapshots."""
        if self.snapshot_max_seqs == 0:
            return math.inf if self.replay_max_seqs > 0 else math.nan
        return self.replay_max_seqs / self.snapshot_max_seqs

    @property
    def bytes_ratio(self) -> float:
        """Snapshot bytes per sequence over ReplaySSM bytes per sequence."""
        return self.snapshot_bytes_per_seq / self.replay_bytes_per_seq

    def as_dict(self) -> dict:
        """Plain-types dict (dtypes and geometry as strings / dicts), e.g. for a JSON report."""
        d = dataclasses.asdict(self)
        d["geometry"] = dataclasses.asdict(self.geometry)
        d["act_dtype"] = _dtype_name(self.act_dtype)
        d["state_dtype"] = _dtype_name(self.state_dtype)
        d["ratio"] = self.ratio
        d["bytes_ratio"] = self.bytes_ratio
        return d


def plan_concurrency(memory_bytes: int, family: str, geometry, num_layers: int = 1, hist_capacity: int = 16,
                     max_tokens: int = 4, act_dtype=torch.bfloat16, state_dtype=torch.float32,
                     ring_len: Optional[int] = None) -> ConcurrencyPlan:
    """The most concurrent sequences whose SSM cache fits ``memory_bytes``, ReplaySSM vs snapshots.

    Args:
        memory_bytes: the budget for SSM caches (all layers, all sequences).
        family: ``"mamba2"`` (``geometry`` a :class:`Mamba2Geometry`) or ``"gdn"`` (a
            :class:`GDNGeometry`).
        num_layers: SSM layers of the model.
        hist_capacity, max_tokens: ``B`` and ``T``; ``ring_len`` defaults to ``B + T``.
        act_dtype, state_dtype: ring and checkpoint dtypes (the snapshot baseline keeps its states
            in ``state_dtype`` too).

    Returns a :class:`ConcurrencyPlan` (formulas in its docstring).
    """
    owner = "plan_concurrency"
    families = {"mamba2": (Mamba2Geometry, Mamba2Cache), "gdn": (GDNGeometry, GDNCache)}
    if family not in families:
        raise ValueError(f"{owner}: family must be 'mamba2' or 'gdn', got {family!r}")
    geometry_cls, cache_cls = families[family]
    if not isinstance(geometry, geometry_cls):
        raise TypeError(f"{owner}: family {family!r} needs a {geometry_cls.__name__} geometry, "
                        f"got {type(geometry).__name__}")
    _check_int(owner, "memory_bytes", memory_bytes, 0)
    _check_int(owner, "num_layers", num_layers, 1)
    if ring_len is None:
        ring_len = hist_capacity + max_tokens
    _check_ring_geometry(owner, hist_capacity, max_tokens, ring_len)
    _check_dtype(owner, "act_dtype", act_dtype, ACT_DTYPES)
    _check_dtype(owner, "state_dtype", state_dtype, STATE_DTYPES)

    parts = cache_cls._parts(geometry, ring_len, act_dtype, state_dtype)
    part_bytes = {name: math.prod(inner) * _element_size(dt) for name, inner, dt in parts}
    checkpoint = part_bytes.pop("state")
    ring = sum(part_bytes.values())
    replay = num_layers * (checkpoint + ring) + Cursors.BYTES_PER_SLOT
    snapshot = num_layers * max_tokens * checkpoint
    return ConcurrencyPlan(
        family=family, geometry=geometry, num_layers=num_layers, hist_capacity=hist_capacity,
        max_tokens=max_tokens, ring_len=ring_len, act_dtype=act_dtype, state_dtype=state_dtype,
        memory_bytes=memory_bytes, checkpoint_bytes_per_layer=checkpoint, ring_bytes_per_layer=ring,
        cursor_bytes=Cursors.BYTES_PER_SLOT, replay_bytes_per_seq=replay, snapshot_bytes_per_seq=snapshot,
        replay_max_seqs=memory_bytes // replay, snapshot_max_seqs=memory_bytes // snapshot)
