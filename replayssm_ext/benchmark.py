"""Benchmark: the classic decode step against ReplaySSM decode, side by side in one process.

``python -m replayssm_ext.benchmark --help`` lists the options; bench/README.md says what is
measured and how. In short, for every section (``m2``: Mamba-2 plain decode, ``gdn``: GDN plain
decode), geometry, batch and history capacity B:

- a correctness gate first: decode steps from a fresh checkpoint, committed as serving does,
  until every row has gone through a flush and the step after it; rows at mixed phases and a
  padding row; every kernel compared with the CPU reference of the classic step (a small batch)
  and with the CUDA classic step (the timed batch). A kernel that fails is not timed.
- the baseline ``*_state_update`` (one launch per step) and the replay ``*_decode`` timed over
  whole flush cycles (B steps, T = 1), plus the non-flush steps and the flush step on their own,
  the cursors produced by the real ``commit`` op exactly as serving advances them;
- ``commit`` (one call per model step, not per layer) on its own line;
- a device-to-device copy, whose bandwidth is the yardstick for the analytic byte counts.

Each timed sequence is captured in a CUDA graph and replayed; CUDA events, warm-up, median of
many replays. Cache sets (disjoint slot ranges) are rotated so the data touched between two
visits of the same set is several times the L2 cache.

Sections are functions in ``SECTIONS``; a new section (e.g. speculative verify) is one more
function registered there.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from . import cursor_rules

OPS = torch.ops.replayssm

# ---------------------------------------------------------------------------------------------
# Geometries
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mamba2Geometry:
    name: str
    H: int  # heads
    P: int  # headdim
    N: int  # dstate
    G: int  # groups


@dataclasses.dataclass(frozen=True)
class GDNGeometry:
    name: str
    H: int   # q/k heads
    HV: int  # v heads
    K: int   # key dim
    V: int   # value dim


# The names match the seed's anchor run (anchors/README.md) so its numbers line up by key.
MAMBA2_GEOMETRIES = [
    Mamba2Geometry("nemotron3-nano-4b", 96, 80, 128, 8),
    Mamba2Geometry("nemotron3-super-120b", 128, 64, 128, 8),
]
GDN_GEOMETRIES = [
    GDNGeometry("qwen3.5-4b", 16, 32, 128, 128),
    GDNGeometry("qwen3.5-122b", 16, 64, 128, 128),
]
# --tiny: small enough for the CPU reference ops, still with groups (H/G = 2) and GQA (HV/H = 2).
MAMBA2_TINY = [Mamba2Geometry("m2-tiny", 4, 8, 16, 2)]
GDN_TINY = [GDNGeometry("gdn-tiny", 2, 4, 16, 8)]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# ---------------------------------------------------------------------------------------------
# Anchor numbers: the seed's Triton kernels on one H200
# ---------------------------------------------------------------------------------------------

# Source: /work/shared/anchors/h200-seed-triton.json (summarised in anchors/README.md), the rows
# with T = None (plain decode), microseconds per layer-step, rounded to 0.1 us. Conditions: fp32
# state, bf16 activations, z = None, dt_softplus with bias, all rows in phase, device-to-device
# copy 4197 GB/s. The seed's window length L maps to our B (both: a flush every B steps). Kernel
# names are ours: the seed's m2_base_decode / gdn_base_decode / gdn_rep_* are renamed.
# Key: (kernel, geometry) -> {(batch, B): us}; baselines have B = None.
SEED_ANCHOR_COPY_GBPS = 4197.0
SEED_ANCHOR_US: Dict[Tuple[str, str], Dict[Tuple[int, Optional[int]], float]] = {
    ("m2_base", "nemotron3-nano-4b"): {(1, None): 4.6, (64, None): 155.0, (256, None): 610.9, (512, None): 1215.0},
    ("m2_oo_cycle", "nemotron3-nano-4b"): {(1, 8): 7.0, (64, 8): 89.1, (256, 8): 316.0, (512, 8): 643.4, (1, 16): 6.8, (64, 16): 97.3, (256, 16): 356.0, (512, 16): 708.9, (1, 32): 7.4, (64, 32): 100.2, (256, 32): 380.3, (512, 32): 760.0},
    ("m2_oo_nonflush", "nemotron3-nano-4b"): {(1, 8): 6.8, (64, 8): 77.3, (256, 8): 268.7, (512, 8): 544.8, (1, 16): 6.7, (64, 16): 89.5, (256, 16): 323.5, (512, 16): 641.7, (1, 32): 7.3, (64, 32): 96.3, (256, 32): 364.1, (512, 32): 724.7},
    ("m2_oo_flush", "nemotron3-nano-4b"): {(1, 8): 7.8, (64, 8): 218.5, (256, 8): 822.6, (512, 8): 1612.3, (1, 16): 7.8, (64, 16): 222.6, (256, 16): 839.4, (512, 16): 1666.5, (1, 32): 8.7, (64, 32): 239.8, (256, 32): 896.3, (512, 32): 1763.7},
    ("m2_so_cycle", "nemotron3-nano-4b"): {(1, 8): 6.0, (64, 8): 97.1, (256, 8): 345.6, (512, 8): 692.2, (1, 16): 5.9, (64, 16): 105.2, (256, 16): 374.3, (512, 16): 751.0, (1, 32): 6.4, (64, 32): 107.1, (256, 32): 388.4, (512, 32): 785.8},
    ("m2_so_nonflush", "nemotron3-nano-4b"): {(1, 8): 5.7, (64, 8): 89.9, (256, 8): 315.8, (512, 8): 631.3, (1, 16): 5.7, (64, 16): 100.0, (256, 16): 357.2, (512, 16): 715.5, (1, 32): 6.3, (64, 32): 105.4, (256, 32): 380.6, (512, 32): 771.9},
    ("m2_so_flush", "nemotron3-nano-4b"): {(1, 8): 7.3, (64, 8): 168.3, (256, 8): 626.8, (512, 8): 1238.6, (1, 16): 7.3, (64, 16): 177.2, (256, 16): 632.6, (512, 16): 1253.7, (1, 32): 8.5, (64, 32): 168.8, (256, 32): 634.7, (512, 32): 1255.4},
    ("m2_base", "nemotron3-super-120b"): {(1, None): 4.6, (64, None): 145.0, (256, None): 567.2, (512, None): 1129.5},
    ("m2_oo_cycle", "nemotron3-super-120b"): {(1, 8): 7.0, (64, 8): 93.8, (256, 8): 333.1, (512, 8): 682.6, (1, 16): 6.8, (64, 16): 103.8, (256, 16): 382.2, (512, 16): 744.8, (1, 32): 7.4, (64, 32): 106.8, (256, 32): 406.9, (512, 32): 812.5},
    ("m2_oo_nonflush", "nemotron3-super-120b"): {(1, 8): 6.8, (64, 8): 81.1, (256, 8): 282.8, (512, 8): 574.4, (1, 16): 6.8, (64, 16): 96.0, (256, 16): 348.2, (512, 16): 676.9, (1, 32): 7.3, (64, 32): 103.5, (256, 32): 388.2, (512, 32): 772.3},
    ("m2_oo_flush", "nemotron3-super-120b"): {(1, 8): 7.8, (64, 8): 235.4, (256, 8): 893.6, (512, 8): 1783.2, (1, 16): 7.9, (64, 16): 238.1, (256, 16): 893.6, (512, 16): 1768.2, (1, 32): 8.8, (64, 32): 251.2, (256, 32): 949.4, (512, 32): 1855.6},
    ("m2_so_cycle", "nemotron3-super-120b"): {(1, 8): 6.0, (64, 8): 94.4, (256, 8): 324.9, (512, 8): 644.7, (1, 16): 5.8, (64, 16): 102.4, (256, 16): 364.0, (512, 16): 718.4, (1, 32): 6.4, (64, 32): 106.9, (256, 32): 391.6, (512, 32): 773.4},
    ("m2_so_nonflush", "nemotron3-super-120b"): {(1, 8): 5.7, (64, 8): 87.7, (256, 8): 297.8, (512, 8): 588.3, (1, 16): 5.7, (64, 16): 97.2, (256, 16): 345.3, (512, 16): 682.7, (1, 32): 6.3, (64, 32): 105.2, (256, 32): 383.1, (512, 32): 758.9},
    ("m2_so_flush", "nemotron3-super-120b"): {(1, 8): 7.1, (64, 8): 164.8, (256, 8): 632.0, (512, 8): 1260.8, (1, 16): 7.1, (64, 16): 168.3, (256, 16): 647.2, (512, 16): 1277.3, (1, 32): 8.5, (64, 32): 164.8, (256, 32): 631.0, (512, 32): 1258.7},
    ("gdn_base", "qwen3.5-4b"): {(1, None): 5.9, (64, None): 69.2, (256, None): 275.1, (512, None): 546.4},
    ("gdn_cycle", "qwen3.5-4b"): {(1, 8): 7.6, (64, 8): 44.3, (256, 8): 147.8, (512, 8): 290.4, (1, 16): 7.3, (64, 16): 48.2, (256, 16): 162.2, (512, 16): 317.0, (1, 32): 7.8, (64, 32): 50.1, (256, 32): 176.1, (512, 32): 345.4},
    ("gdn_nonflush", "qwen3.5-4b"): {(1, 8): 7.2, (64, 8): 37.5, (256, 8): 122.8, (512, 8): 243.6, (1, 16): 7.1, (64, 16): 44.7, (256, 16): 148.6, (512, 16): 291.3, (1, 32): 7.7, (64, 32): 48.6, (256, 32): 168.2, (512, 32): 332.3},
    ("gdn_flush", "qwen3.5-4b"): {(1, 8): 11.4, (64, 8): 101.8, (256, 8): 345.8, (512, 8): 673.8, (1, 16): 11.2, (64, 16): 107.1, (256, 16): 367.9, (512, 16): 718.5, (1, 32): 11.6, (64, 32): 110.5, (256, 32): 394.4, (512, 32): 772.2},
    ("gdn_base", "qwen3.5-122b"): {(1, None): 7.1, (64, None): 136.8, (256, None): 539.1, (512, None): 1073.0},
    ("gdn_cycle", "qwen3.5-122b"): {(1, 8): 7.9, (64, 8): 82.7, (256, 8): 285.3, (512, 8): 562.7, (1, 16): 7.7, (64, 16): 90.7, (256, 16): 310.9, (512, 16): 613.8, (1, 32): 8.2, (64, 32): 96.0, (256, 32): 341.8, (512, 32): 673.8},
    ("gdn_nonflush", "qwen3.5-122b"): {(1, 8): 7.5, (64, 8): 68.6, (256, 8): 238.1, (512, 8): 468.8, (1, 16): 7.4, (64, 16): 83.5, (256, 16): 283.9, (512, 16): 561.2, (1, 32): 8.1, (64, 32): 93.0, (256, 32): 326.0, (512, 32): 645.2},
    ("gdn_flush", "qwen3.5-122b"): {(1, 8): 11.9, (64, 8): 193.0, (256, 8): 650.0, (512, 8): 1267.0, (1, 16): 11.6, (64, 16): 207.6, (256, 16): 719.1, (512, 16): 1386.8, (1, 32): 12.0, (64, 32): 210.7, (256, 32): 751.0, (512, 32): 1460.5},
}


def seed_anchor_us(kernel: str, geometry: str, batch: int, B: Optional[int]) -> Optional[float]:
    return SEED_ANCHOR_US.get((kernel, geometry), {}).get((batch, B))


# ---------------------------------------------------------------------------------------------
# Bytes moved per call, counted analytically (the fewest bytes each op must move through device
# memory: every input read once, every output written once). `a` = activation element bytes,
# `sb` = state element bytes. Index and cursor tensors count too: slot id 4 B, cursor read
# hist 4 + start 4 + flush 1 = 9 B per row.
# ---------------------------------------------------------------------------------------------

SLOT_ID_BYTES = 4
CURSOR_BYTES = 4 + 4 + 1  # hist, start, flush of one slot
ACCEPTED_BYTES = 4


def mamba2_state_bytes(g: Mamba2Geometry, sb: int) -> int:
    """One slot's checkpoint / state: H*P*N elements."""
    return g.H * g.P * g.N * sb


def mamba2_ring_entry_bytes(g: Mamba2Geometry, a: int) -> int:
    """One ring entry of one slot: x (H*P act) + B (G*N act) + dt after bias/softplus (H fp32)."""
    return g.H * g.P * a + g.G * g.N * a + g.H * 4


def mamba2_token_io_bytes(g: Mamba2Geometry, a: int, with_z: bool) -> int:
    """Per-token inputs and output: x H*P, raw dt H, B G*N, C G*N, z H*P (optional), out H*P."""
    return (g.H * g.P + g.H + 2 * g.G * g.N + (g.H * g.P if with_z else 0) + g.H * g.P) * a


def mamba2_param_bytes(g: Mamba2Geometry) -> int:
    """Per call, not per row: A, D, dt_bias (H fp32 each)."""
    return 3 * g.H * 4


def mamba2_state_update_bytes(g: Mamba2Geometry, batch: int, sb: int, a: int, with_z: bool) -> int:
    """Classic step: per row the state is read and written (2 * state), plus token io and the slot id."""
    per_row = 2 * mamba2_state_bytes(g, sb) + mamba2_token_io_bytes(g, a, with_z) + SLOT_ID_BYTES
    return batch * per_row + mamba2_param_bytes(g)


def mamba2_decode_bytes(g: Mamba2Geometry, hist: np.ndarray, flush: np.ndarray, sb: int, a: int,
                        with_z: bool) -> int:
    """ReplaySSM decode step, per live row with cursor (hist, flush): checkpoint read (+ write on a
    flush row), the `hist` history entries read, the new entry appended, token io, slot id,
    cursors. Both routes move the same bytes (state_and_output forms the state on chip)."""
    hist = np.asarray(hist, dtype=np.int64)
    flush = np.asarray(flush, dtype=np.int64)
    rows = hist.size
    e = mamba2_ring_entry_bytes(g, a)
    total = (mamba2_state_bytes(g, sb) * int((1 + flush).sum())
             + e * int(hist.sum()) + e * rows
             + (mamba2_token_io_bytes(g, a, with_z) + SLOT_ID_BYTES + CURSOR_BYTES) * rows)
    return total + mamba2_param_bytes(g)


def gdn_state_bytes(g: GDNGeometry, sb: int) -> int:
    """One slot's checkpoint / state: HV*V*K elements."""
    return g.HV * g.V * g.K * sb


def gdn_ring_entry_bytes(g: GDNGeometry, a: int) -> int:
    """One ring entry of one slot: u (HV*V act) + k-hat (H*K act) + g (HV fp32)."""
    return g.HV * g.V * a + g.H * g.K * a + g.HV * 4


def gdn_token_io_bytes(g: GDNGeometry, a: int) -> int:
    """Per-token inputs and output: q, k (H*K each), v (HV*V), a, b (HV each), out (HV*V)."""
    return (2 * g.H * g.K + g.HV * g.V + 2 * g.HV + g.HV * g.V) * a


def gdn_param_bytes(g: GDNGeometry) -> int:
    """Per call: A_log, dt_bias (HV fp32 each)."""
    return 2 * g.HV * 4


def gdn_state_update_bytes(g: GDNGeometry, batch: int, sb: int, a: int) -> int:
    """Classic step: per row state read + write, token io, slot id."""
    per_row = 2 * gdn_state_bytes(g, sb) + gdn_token_io_bytes(g, a) + SLOT_ID_BYTES
    return batch * per_row + gdn_param_bytes(g)


def gdn_decode_bytes(g: GDNGeometry, hist: np.ndarray, flush: np.ndarray, sb: int, a: int) -> int:
    """ReplaySSM GDN decode step, per live row: checkpoint read (+ write on flush), `hist` entries
    read, one appended, token io, slot id, cursors."""
    hist = np.asarray(hist, dtype=np.int64)
    flush = np.asarray(flush, dtype=np.int64)
    rows = hist.size
    e = gdn_ring_entry_bytes(g, a)
    total = (gdn_state_bytes(g, sb) * int((1 + flush).sum())
             + e * int(hist.sum()) + e * rows
             + (gdn_token_io_bytes(g, a) + SLOT_ID_BYTES + CURSOR_BYTES) * rows)
    return total + gdn_param_bytes(g)


def commit_bytes(batch: int) -> int:
    """commit: per row the slot id and accepted count read, the cursor read and written."""
    return batch * (SLOT_ID_BYTES + ACCEPTED_BYTES + 2 * CURSOR_BYTES)


def copy_bytes(nbytes: int) -> int:
    """dst.copy_(src): read + write."""
    return 2 * nbytes


# ---------------------------------------------------------------------------------------------
# Kernel families: how to allocate, fill and call each op (raw torch.ops, our own tensors)
# ---------------------------------------------------------------------------------------------


def has_kernel(op: str, device: torch.device) -> bool:
    key = "CUDA" if device.type == "cuda" else "CPU"
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"replayssm::{op}", key)


@dataclasses.dataclass
class Cursors:
    hist: torch.Tensor   # (slots,) int32
    start: torch.Tensor  # (slots,) int32
    flush: torch.Tensor  # (slots,) int8

    @staticmethod
    def empty(n_slots: int, device) -> "Cursors":
        return Cursors(torch.zeros(n_slots, dtype=torch.int32, device=device),
                       torch.zeros(n_slots, dtype=torch.int32, device=device),
                       torch.zeros(n_slots, dtype=torch.int8, device=device))

    def clone(self) -> "Cursors":
        return Cursors(self.hist.clone(), self.start.clone(), self.flush.clone())

    def copy_(self, other: "Cursors") -> None:
        self.hist.copy_(other.hist)
        self.start.copy_(other.start)
        self.flush.copy_(other.flush)


class Family:
    """One SSM family's ops. Subclasses fill the tensors and call the ops; everything else
    (gates, timing, byte accounting, tables) is shared."""

    section: str
    decode_op: str
    base_op: str
    # (variant name, extra keyword arguments of the decode op); kernel rows are "<variant>_cycle" etc.
    variants: List[Tuple[str, dict]]
    base_kernel: str

    def __init__(self, geom, state_dtype: torch.dtype, act_dtype: torch.dtype, device: torch.device, gen):
        self.geom = geom
        self.state_dtype = state_dtype
        self.act = act_dtype
        self.device = device
        self.gen = gen
        self.sb = torch.empty((), dtype=state_dtype).element_size()
        self.a = torch.empty((), dtype=act_dtype).element_size()

    def randn(self, *shape, dtype=torch.float32, std=1.0, device=None) -> torch.Tensor:
        t = torch.randn(*shape, generator=self.gen, device=self.device, dtype=torch.float32)
        if std != 1.0:
            t.mul_(std)
        t = t.to(dtype)
        return t if device is None else t.to(device)

    def rand(self, *shape) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, device=self.device, dtype=torch.float32)

    # Per-family interface.
    def state_row_bytes(self) -> int: ...
    def make_params(self) -> dict: ...
    def make_inputs(self, batch: int) -> dict: ...
    def make_state(self, n_slots: int) -> torch.Tensor: ...
    def make_rings(self, n_slots: int, R: int, params: dict, poison: bool = False) -> dict: ...
    def make_out(self, batch: int) -> torch.Tensor: ...
    def decode(self, inp, params, state, rings, slots, cur: Cursors, out, **variant_kwargs) -> None: ...
    def state_update(self, inp, params, state, slots, out) -> None: ...
    def decode_bytes(self, hist, flush) -> int: ...
    def base_bytes(self, batch: int) -> int: ...


class Mamba2Family(Family):
    section = "m2"
    decode_op = "mamba2_decode"
    base_op = "mamba2_state_update"
    base_kernel = "m2_base"
    variants = [("m2_oo", {"route": "output_only"}), ("m2_so", {"route": "state_and_output"})]

    def __init__(self, *args, with_z: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.with_z = with_z

    def state_row_bytes(self):
        return mamba2_state_bytes(self.geom, self.sb)

    def make_params(self):
        H = self.geom.H
        # A = -(U[0,1) + 1); dt_bias = U[0,1) - 4 so softplus(dt + dt_bias) is ~0.01..0.3 as in
        # trained Mamba-2 layers.
        return dict(A=-(self.rand(H) + 1.0), D=self.randn(H), dt_bias=self.rand(H) - 4.0)

    def make_inputs(self, batch):
        g = self.geom
        return dict(x=self.randn(batch, g.H, g.P, dtype=self.act), dt=self.randn(batch, g.H, dtype=self.act),
                    B=self.randn(batch, g.G, g.N, dtype=self.act), C=self.randn(batch, g.G, g.N, dtype=self.act),
                    z=self.randn(batch, g.H, g.P, dtype=self.act) if self.with_z else None)

    def make_state(self, n_slots):
        g = self.geom
        # Stationary magnitude of S = sum_t exp(A*delta*t) delta x B^T with delta ~ 0.05, |A| ~ 1.5
        # and unit x, B: var ~ delta / (2|A|) ~ 0.02, so std ~ 0.1.
        return self.randn(n_slots, g.H, g.P, g.N, dtype=self.state_dtype, std=0.1)

    def make_rings(self, n_slots, R, params, poison=False):
        g = self.geom
        if poison:  # for the gate: an entry read before it is written turns the output into NaN
            nan = float("nan")
            return dict(ring_x=torch.full((n_slots, g.H, R, g.P), nan, dtype=self.act, device=self.device),
                        ring_B=torch.full((n_slots, g.G, R, g.N), nan, dtype=self.act, device=self.device),
                        ring_dt=torch.full((n_slots, g.H, R), nan, dtype=torch.float32, device=self.device))
        dt = self.randn(n_slots, g.H, R) + params["dt_bias"][None, :, None]
        return dict(ring_x=self.randn(n_slots, g.H, R, g.P, dtype=self.act),
                    ring_B=self.randn(n_slots, g.G, R, g.N, dtype=self.act),
                    ring_dt=torch.nn.functional.softplus(dt))

    def make_out(self, batch):
        return torch.empty(batch, self.geom.H, self.geom.P, dtype=self.act, device=self.device)

    def decode(self, inp, params, state, rings, slots, cur, out, route="output_only"):
        OPS.mamba2_decode(inp["x"], inp["dt"], params["A"], inp["B"], inp["C"], params["D"], inp["z"],
                          params["dt_bias"], True, slots, cur.hist, cur.start, cur.flush, state,
                          rings["ring_x"], rings["ring_B"], rings["ring_dt"], out, route=route)

    def state_update(self, inp, params, state, slots, out):
        OPS.mamba2_state_update(inp["x"], inp["dt"], params["A"], inp["B"], inp["C"], params["D"], inp["z"],
                                params["dt_bias"], True, slots, state, out)

    def decode_bytes(self, hist, flush):
        return mamba2_decode_bytes(self.geom, hist, flush, self.sb, self.a, self.with_z)

    def base_bytes(self, batch):
        return mamba2_state_update_bytes(self.geom, batch, self.sb, self.a, self.with_z)


class GDNFamily(Family):
    section = "gdn"
    decode_op = "gdn_decode"
    base_op = "gdn_state_update"
    base_kernel = "gdn_base"
    variants = [("gdn", {})]

    def state_row_bytes(self):
        return gdn_state_bytes(self.geom, self.sb)

    def make_params(self):
        HV = self.geom.HV
        # A_log = log(U[1, 16)) as Qwen3.5 initialises A; dt_bias = U[0,1) - 4.
        return dict(A_log=torch.log(self.rand(HV) * 15.0 + 1.0), dt_bias=self.rand(HV) - 4.0,
                    scale=self.geom.K ** -0.5)

    def make_inputs(self, batch):
        g = self.geom
        return dict(q=self.randn(batch, g.H, g.K, dtype=self.act), k=self.randn(batch, g.H, g.K, dtype=self.act),
                    v=self.randn(batch, g.HV, g.V, dtype=self.act), a=self.randn(batch, g.HV, dtype=self.act),
                    b=self.randn(batch, g.HV, dtype=self.act))

    def make_state(self, n_slots):
        g = self.geom
        return self.randn(n_slots, g.HV, g.V, g.K, dtype=self.state_dtype, std=0.1)

    def make_rings(self, n_slots, R, params, poison=False):
        g = self.geom
        if poison:
            nan = float("nan")
            return dict(ring_u=torch.full((n_slots, g.HV, R, g.V), nan, dtype=self.act, device=self.device),
                        ring_k=torch.full((n_slots, g.H, R, g.K), nan, dtype=self.act, device=self.device),
                        ring_g=torch.full((n_slots, g.HV, R), nan, dtype=torch.float32, device=self.device))
        k = torch.nn.functional.normalize(self.randn(n_slots, g.H, R, g.K), dim=-1)
        decay = torch.nn.functional.softplus(self.randn(n_slots, g.HV, R) + params["dt_bias"][None, :, None])
        # u = beta (v - e^g S k) with beta = sigmoid(b) ~ 0.5 and unit v.
        return dict(ring_u=self.randn(n_slots, g.HV, R, g.V, dtype=self.act, std=0.5),
                    ring_k=k.to(self.act),
                    ring_g=-torch.exp(params["A_log"])[None, :, None] * decay)

    def make_out(self, batch):
        return torch.empty(batch, self.geom.HV, self.geom.V, dtype=self.act, device=self.device)

    def decode(self, inp, params, state, rings, slots, cur, out):
        OPS.gdn_decode(inp["q"], inp["k"], inp["v"], inp["a"], inp["b"], params["A_log"], params["dt_bias"],
                       params["scale"], True, slots, cur.hist, cur.start, cur.flush, state,
                       rings["ring_u"], rings["ring_k"], rings["ring_g"], out)

    def state_update(self, inp, params, state, slots, out):
        OPS.gdn_state_update(inp["q"], inp["k"], inp["v"], inp["a"], inp["b"], params["A_log"], params["dt_bias"],
                             params["scale"], True, slots, state, out)

    def decode_bytes(self, hist, flush):
        return gdn_decode_bytes(self.geom, hist, flush, self.sb, self.a)

    def base_bytes(self, batch):
        return gdn_state_update_bytes(self.geom, batch, self.sb, self.a)


def tensors_to(d: dict, device) -> dict:
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def commit(slots, accepted, cur: Cursors, B: int, T: int, R: int) -> None:
    OPS.commit(slots, accepted, cur.hist, cur.start, cur.flush, B, T, R)


def reset(slots, cur: Cursors, B: int, T: int) -> None:
    OPS.reset(slots, cur.hist, cur.start, cur.flush, B, T)


# ---------------------------------------------------------------------------------------------
# Run context: device, timer, budget, results
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Timing:
    median_s: float  # per pass of the timed sequence
    min_s: float
    max_s: float
    reps: int
    method: str      # "graph", "events" or "wall"


class Timer:
    """Times a sequence of calls. CUDA: the sequence (repeated until it has at least `min_calls`
    launches, so a graph's own launch cost stays small) is captured in a CUDA graph, run once
    eagerly and replayed once as warm-up, then replayed `reps` times, each between two CUDA events;
    reps are chosen so the timed replays last about `target_s`. CPU: wall clock around eager runs."""

    def __init__(self, device: torch.device, use_graphs: bool, target_s: float, min_reps: int, max_reps: int,
                 min_calls: int):
        self.device = device
        self.use_graphs = use_graphs and device.type == "cuda"
        self.target_s = target_s
        self.min_reps = min_reps
        self.max_reps = max_reps
        self.min_calls = min_calls

    def _reps_for(self, one_s: float) -> int:
        return int(min(self.max_reps, max(self.min_reps, math.ceil(self.target_s / max(one_s, 1e-9)))))

    def time(self, calls: Sequence[Callable[[], None]]) -> Timing:
        inner = max(1, math.ceil(self.min_calls / len(calls)))
        seq = list(calls) * inner

        def run_all():
            for c in seq:
                c()

        if self.device.type != "cuda":
            run_all()  # warm-up
            t0 = time.perf_counter()
            run_all()
            reps = self._reps_for(time.perf_counter() - t0)
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                run_all()
                samples.append(time.perf_counter() - t0)
            return self._result(samples, inner, "wall")

        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            run_all()  # eager warm-up: surfaces argument errors before capture
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        graph = None
        if self.use_graphs:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run_all()
            launch = graph.replay
        else:
            launch = run_all
        first = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        first[0].record()
        launch()  # warm-up replay
        first[1].record()
        torch.cuda.synchronize(self.device)
        reps = self._reps_for(first[0].elapsed_time(first[1]) * 1e-3)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for begin, end in events:
            begin.record()
            launch()
            end.record()
        torch.cuda.synchronize(self.device)
        samples = [b.elapsed_time(e) * 1e-3 for b, e in events]
        del graph
        return self._result(samples, inner, "graph" if self.use_graphs else "events")

    @staticmethod
    def _result(samples, inner, method) -> Timing:
        return Timing(statistics.median(samples) / inner, min(samples) / inner, max(samples) / inner,
                      len(samples), method)


class Budget:
    def __init__(self, seconds: float):
        self.t0 = time.perf_counter()
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def exhausted(self) -> bool:
        return self.elapsed() > self.seconds


class FatalDeviceError(RuntimeError):
    pass


@dataclasses.dataclass
class Context:
    args: argparse.Namespace
    device: torch.device
    timer: Timer
    budget: Budget
    l2_bytes: int
    copy_gbps: Optional[float] = None
    rows: List[dict] = dataclasses.field(default_factory=list)
    gates: List[dict] = dataclasses.field(default_factory=list)
    skipped: List[str] = dataclasses.field(default_factory=list)
    errors: List[str] = dataclasses.field(default_factory=list)
    commit_timed: set = dataclasses.field(default_factory=set)
    generators: Dict[str, torch.Generator] = dataclasses.field(default_factory=dict)

    def generator_for(self, device: torch.device) -> torch.Generator:
        """One seeded generator per device, so a run is reproducible."""
        key = str(device)
        if key not in self.generators:
            self.generators[key] = torch.Generator(device=device).manual_seed(self.args.seed)
        return self.generators[key]

    def geometry_selected(self, name: str) -> bool:
        return self.args.geometries is None or name in self.args.geometries

    fatal: Optional[str] = None

    def check_device_alive(self) -> None:
        """After an exception: a CUDA error that poisons the context (e.g. an illegal address)
        makes every later call fail, so stop the run there (what was measured is still written)."""
        if self.device.type != "cuda":
            return
        try:
            torch.cuda.synchronize(self.device)
        except Exception as e:
            self.fatal = f"CUDA context unusable: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            raise FatalDeviceError(self.fatal) from e

    def guarded(self, what: str, fn: Callable[[], None]) -> bool:
        """Runs one timed item; an exception is reported as an error and the run goes on."""
        try:
            fn()
            return True
        except FatalDeviceError:
            raise
        except Exception as e:
            self.note_error(f"{what}: raised {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            self.check_device_alive()
            return False

    def note_skip(self, what: str) -> None:
        print(f"  skip: {what}")
        self.skipped.append(what)

    def note_error(self, what: str) -> None:
        print(f"  ERROR: {what}")
        self.errors.append(what)

    def log(self, msg: str) -> None:
        print(f"[{self.budget.elapsed():6.1f}s] {msg}", flush=True)

    def anchors_apply(self) -> bool:
        """The seed's numbers compare only under its conditions (see SEED_ANCHOR_US)."""
        a = self.args
        return (self.device.type == "cuda" and not a.tiny and a.state_dtype == "fp32" and a.act_dtype == "bf16"
                and not a.with_z and not a.stagger and not a.commit_in_cycle)

    def add_row(self, *, section, kernel, geometry, batch, B, timing: Timing, nbytes: Optional[float],
                n_sets, base_us: Optional[float] = None, note: str = "") -> dict:
        us = timing.median_s * 1e6
        gbps = nbytes / timing.median_s / 1e9 if nbytes else None
        anchor = seed_anchor_us(kernel, geometry, batch, B) if self.anchors_apply() else None
        row = dict(section=section, kernel=kernel, geometry=geometry, batch=batch, B=B, us=us,
                   us_min=timing.min_s * 1e6, us_max=timing.max_s * 1e6, reps=timing.reps, timing=timing.method,
                   bytes=nbytes, gbps=gbps,
                   copy_frac=(gbps / self.copy_gbps if gbps and self.copy_gbps else None),
                   base_us=base_us, speedup_vs_base=(base_us / us if base_us else None),
                   seed_us=anchor, speedup_vs_seed=(anchor / us if anchor else None),
                   n_sets=n_sets, note=note)
        self.rows.append(row)
        self.log(f"{kernel:<22} {geometry:<22} batch={batch:<4} B={str(B):<4} {us:10.2f} us"
                 + (f"  {gbps:8.1f} GB/s" if gbps else "")
                 + (f"  x{row['speedup_vs_base']:.2f} vs base" if row["speedup_vs_base"] else "")
                 + (f"  x{row['speedup_vs_seed']:.2f} vs seed" if row["speedup_vs_seed"] else ""))
        return row


# ---------------------------------------------------------------------------------------------
# Cursors: run the real commit op to the phases the timing needs
# ---------------------------------------------------------------------------------------------


def cursor_snapshots(all_slots: torch.Tensor, phases: np.ndarray, n_slots: int, B: int, R: int,
                     device) -> Tuple[List[Cursors], List[Tuple[np.ndarray, np.ndarray]]]:
    """The cursors of one steady-state flush cycle (T = 1, accepted = 1 every step), produced by
    the commit op: every slot is reset, then committed B + 1 + phase times (B + 1 commits take a
    fresh slot through its first flush to hist = 1), then B snapshots are taken, one commit apart.
    Snapshot j of a slot with phase p has hist = (p + j) % B + 1 and flush = (hist == B). Slots
    advance independently through padded commits (slot id -1 for rows that already arrived).

    Returns the device snapshots and, per snapshot, host copies of (hist, flush) per slot. The
    host copies are checked against cursor_rules, the Python mirror of cursor.h."""
    T = 1
    cur = Cursors.empty(n_slots, device)
    reset(all_slots, cur, B, T)
    ones = torch.ones(all_slots.numel(), dtype=torch.int32, device=device)
    counts = torch.as_tensor(B + 1 + phases, dtype=torch.int64, device=device)
    pad = torch.full_like(all_slots, cursor_rules.PAD_SLOT)
    for i in range(int(counts.max().item())):
        commit(torch.where(counts > i, all_slots, pad), ones, cur, B, T, R)
    snaps, host = [], []
    for _ in range(B):
        snaps.append(cur.clone())
        host.append((cur.hist.cpu().numpy().copy(), cur.flush.cpu().numpy().copy()))
        commit(all_slots, ones, cur, B, T, R)

    # Check against the mirror: one simulation per distinct phase.
    slot_ids = all_slots.cpu().numpy()
    for p in np.unique(phases):
        c = cursor_rules.reset_cursor(B, T)
        for _ in range(B + 1 + int(p)):
            c = cursor_rules.commit_cursor(c, 1, B, T, R)
        for j in range(B):
            for s in slot_ids[phases == p][:4]:
                h, f = host[j][0][s], host[j][1][s]
                if (h, f) != (c.hist, c.flush):
                    raise RuntimeError(f"commit op and cursor_rules disagree: slot {s} phase {p} snapshot {j}: "
                                       f"op (hist={h}, flush={f}), cursor_rules (hist={c.hist}, flush={c.flush})")
            c = cursor_rules.commit_cursor(c, 1, B, T, R)
    return snaps, host


# ---------------------------------------------------------------------------------------------
# Correctness gate
# ---------------------------------------------------------------------------------------------


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> Tuple[float, float]:
    """(max |got - ref|, normwise ||got - ref|| / ||ref||), in float64 on ref's device."""
    got, ref = got.to(ref.device).double(), ref.double()
    diff = got - ref
    return diff.abs().max().item(), (diff.norm() / ref.norm().clamp_min(1e-30)).item()


def cycle_check(ctx: Context, fam_factory: Callable[[torch.device], Family], B: int, batch: int,
                delays: Sequence[int], pad_rows: Sequence[int], kernels: List[Tuple[str, Optional[dict]]],
                ref_device: torch.device, steps_after: int, label: str) -> Dict[str, bool]:
    """Drives each kernel under test and a reference through the same decode steps from the same
    random checkpoint, advancing the cursors with commit (accepted = 1) after every step as serving
    does, and compares every output and every checkpoint a flush writes.

    kernels: (name, variant kwargs) for replay variants, (name, None) for the classic step on the
    device under test. Row r joins after delays[r] steps (it is padding, slot -1, until then), so
    rows run at mixed phases; pad_rows stay padding throughout. Rings start NaN-filled (a read of an
    unwritten entry shows) and outputs are NaN-poisoned before each call; padding rows must stay NaN.
    The reference is the classic step (mamba2_state_update / gdn_state_update) on ref_device.
    Returns {kernel name: passed}."""
    dev = ctx.device
    fam = fam_factory(dev)
    ref_fam = fam_factory(ref_device)
    T, R = 1, B + 1
    n_rows = batch + len(pad_rows)
    live_rows = [r for r in range(n_rows) if r not in set(pad_rows)]
    n_slots = batch + 1  # one slot no row uses: it must stay untouched
    perm = torch.randperm(n_slots, generator=torch.Generator().manual_seed(ctx.args.seed + 7))
    row_slot = torch.full((n_rows,), cursor_rules.PAD_SLOT, dtype=torch.int32)
    row_slot[live_rows] = perm[:batch].to(torch.int32)
    row_delay = torch.zeros(n_rows, dtype=torch.int64)
    row_delay[live_rows] = torch.as_tensor(list(delays), dtype=torch.int64)
    n_steps = int(row_delay.max()) + steps_after

    params = fam.make_params()
    ref_params = tensors_to(params, ref_device)
    state0 = fam.make_state(n_slots)
    ref_state = state0.to(ref_device).clone()
    under_test = {}
    for name, vk in kernels:
        st = state0.clone()
        rings = fam.make_rings(n_slots, R, params, poison=True) if vk is not None else None
        under_test[name] = dict(vk=vk, state=st, rings=rings, out=fam.make_out(n_rows),
                                worst=dict(out_abs=0.0, out_rel=0.0, state_abs=0.0, state_rel=0.0),
                                problems=[], raised=False)
    cur = Cursors.empty(n_slots, dev)
    all_slots = torch.arange(n_slots, dtype=torch.int32, device=dev)
    reset(all_slots, cur, B, T)
    ref_out = ref_fam.make_out(n_rows)
    untouched_slot = int(perm[batch])
    state0_untouched = state0[untouched_slot].clone()

    for step in range(n_steps):
        active = row_delay <= step
        slots_host = torch.where(active, row_slot, torch.full_like(row_slot, cursor_rules.PAD_SLOT))
        slots = slots_host.to(dev)
        live = (slots_host >= 0).nonzero().flatten()
        flush_host = cur.flush.cpu()
        flushing = [int(slots_host[r]) for r in live.tolist() if flush_host[int(slots_host[r])]]
        inp = fam.make_inputs(n_rows)
        ref_inp = tensors_to(inp, ref_device)
        ref_before = ref_state[flushing].clone() if flushing else None
        ref_out.fill_(float("nan"))
        ref_fam.state_update(ref_inp, ref_params, ref_state, slots_host.to(ref_device), ref_out)
        for name, k in under_test.items():
            if k["raised"]:
                continue
            k["out"].fill_(float("nan"))
            try:
                if k["vk"] is None:
                    fam.state_update(inp, params, k["state"], slots, k["out"])
                else:
                    fam.decode(inp, params, k["state"], k["rings"], slots, cur, k["out"], **k["vk"])
                out = k["out"].to(ref_device)
            except Exception as e:  # a kernel that rejects this geometry fails its gate, the run goes on
                k["raised"] = True
                k["problems"].insert(0, f"step {step}: raised {type(e).__name__}: {str(e).splitlines()[0][:300]}")
                ctx.check_device_alive()
                continue
            w = k["worst"]
            if live.numel():
                got, ref = out[live], ref_out[live]
                if not torch.isfinite(got).all():
                    k["problems"].append(f"step {step}: non-finite outputs on live rows")
                a, r = rel_err(got, ref)
                w["out_abs"], w["out_rel"] = max(w["out_abs"], a), max(w["out_rel"], r)
            padded = (slots_host < 0).nonzero().flatten()
            if padded.numel() and not torch.isnan(out[padded]).all():
                k["problems"].append(f"step {step}: a padding row's output was written")
            if k["vk"] is not None and flushing:
                # A flush step's checkpoint is the state after the history, before this token.
                a, r = rel_err(k["state"][flushing], ref_before)
                w["state_abs"], w["state_rel"] = max(w["state_abs"], a), max(w["state_rel"], r)
        commit(slots, torch.ones(n_rows, dtype=torch.int32, device=dev), cur, B, T, R)

    results = {}
    for name, k in under_test.items():
        if not k["raised"] and not torch.equal(k["state"][untouched_slot], state0_untouched):
            k["problems"].append("the state of a slot no row uses was written")
        if k["vk"] is None and not k["raised"]:  # the classic step carries the state: compare it at the end
            a, r = rel_err(k["state"], ref_state)
            k["worst"]["state_abs"], k["worst"]["state_rel"] = a, r
        w = k["worst"]
        ok = (not k["problems"] and math.isfinite(w["out_rel"]) and w["out_rel"] <= ctx.args.gate_out_tol
              and math.isfinite(w["state_rel"]) and w["state_rel"] <= ctx.args.gate_state_tol)
        results[name] = ok
        fam_name = fam.geom.name
        rec = dict(check=label, kernel=name, geometry=fam_name, batch=batch, B=B, steps=n_steps,
                   reference=f"{fam.base_op} on {ref_device.type}", **w, problems=k["problems"][:5], passed=ok)
        ctx.gates.append(rec)
        ctx.log(f"gate {label:<6} {name:<8} {fam_name:<22} batch={batch:<4} B={B:<3} steps={n_steps:<3} "
                f"out max|err|={w['out_abs']:.3e} rel={w['out_rel']:.2e}  "
                f"state max|err|={w['state_abs']:.3e} rel={w['state_rel']:.2e}  {'ok' if ok else 'FAILED'}"
                + (f"  ({'; '.join(k['problems'][:3])})" if k["problems"] else ""))
        if not ok:
            ctx.note_error(f"gate {label} failed: {name} {fam_name} batch={batch} B={B}: not timed")
    return results


# ---------------------------------------------------------------------------------------------
# The plain-decode section driver (Mamba-2 and GDN share it)
# ---------------------------------------------------------------------------------------------


def n_cache_sets(ctx: Context, state_bytes_per_set: int) -> int:
    """Enough disjoint cache sets that rotating through them touches l2_multiple x L2 of state
    before a set is visited again (rings only add to that)."""
    if ctx.args.sets:
        return ctx.args.sets
    if ctx.l2_bytes <= 0:
        return 1
    return int(min(ctx.args.max_sets, max(1, math.ceil(ctx.args.l2_multiple * ctx.l2_bytes / state_bytes_per_set))))


def time_commit(ctx: Context, batch: int, B: int, sets_slots: List[torch.Tensor], n_slots: int) -> None:
    """commit runs once per model step for the whole model; timed once per batch size."""
    if batch in ctx.commit_timed:
        return
    ctx.commit_timed.add(batch)
    dev = ctx.device
    if not has_kernel("commit", dev):
        ctx.note_skip(f"commit has no {dev.type} kernel")
        return
    cur = Cursors.empty(n_slots, dev)
    ones = torch.ones(batch, dtype=torch.int32, device=dev)
    calls = [lambda s=s: commit(s, ones, cur, B, 1, B + 1) for s in sets_slots]
    ctx.guarded(f"commit batch={batch}", lambda: ctx.add_row(
        section="commit", kernel="commit", geometry="-", batch=batch, B=B,
        timing=per_call(ctx.timer.time(calls), len(calls)), nbytes=commit_bytes(batch), n_sets=len(calls),
        note="once per model step, all layers"))


def run_decode_section(ctx: Context, make_family: Callable[[object, torch.device], Family], geometries) -> None:
    args = ctx.args
    dev = ctx.device
    probe = make_family(geometries[0], dev)
    base_ok = has_kernel(probe.base_op, dev)
    decode_ok = has_kernel(probe.decode_op, dev)
    if not base_ok:
        ctx.note_skip(f"{probe.base_op} has no {dev.type} kernel: baseline not timed")
    if not decode_ok:
        ctx.note_skip(f"{probe.decode_op} has no {dev.type} kernel: replay not timed")
    elif not has_kernel("commit", dev):
        ctx.note_skip(f"commit has no {dev.type} kernel (it advances the cursors): replay not timed")
        decode_ok = False
    if not (base_ok or decode_ok):
        return
    variants = [(n, vk) for n, vk in probe.variants
                if probe.section != "m2" or vk["route"] in args.routes] if decode_ok else []
    cpu = torch.device("cpu")

    # Most informative first, so a budget cut drops the least important: batch 256 and 1 before
    # 64 and 512, B = 16 before 8 and 32.
    def batch_key(b):
        order = [256, 1, 64, 512]
        return (order.index(b) if b in order else len(order), b)

    def hist_key(b):
        return (0 if b == 16 else 1, b)

    hist_capacities = sorted(args.hist_capacities, key=hist_key)
    for geom in geometries:
        def factory(d, geom=geom):
            return make_family(geom, d)

        # Gate per B: a small batch, rows at mixed phases and a padding row, every kernel against
        # the CPU reference of the classic step.
        gated: Dict[int, List[Tuple[str, dict]]] = {}
        base_passed = base_ok
        for B in hist_capacities:
            # Rows join at steps 0, B/2, B-1 (mixed phases); B + 2 steps after the last join take
            # every row through a flush step and the step after it.
            delays = sorted({0, B // 2, B - 1})
            kernels = list(variants) + ([(probe.base_kernel, None)] if base_ok and dev.type != "cpu" else [])
            passed: Dict[str, bool] = {}
            ctx.guarded(f"gate {probe.section} {geom.name} B={B}", lambda: passed.update(cycle_check(
                ctx, factory, B, len(delays), delays, pad_rows=[1], kernels=kernels, ref_device=cpu,
                steps_after=B + 2, label="small")))
            if not passed:  # the gate itself failed (e.g. out of memory): nothing is timed
                passed = {name: False for name, _ in kernels}
            gated[B] = [(n, vk) for n, vk in variants if passed.get(n)]
            base_passed = base_passed and passed.get(probe.base_kernel, True)
        for batch in sorted(args.batches, key=batch_key):
            if ctx.budget.exhausted():
                ctx.note_skip(f"{probe.section} {geom.name} batch={batch}: budget {args.budget_s:.0f}s spent")
                continue
            ctx.guarded(f"{probe.section} {geom.name} batch={batch}",
                        lambda: time_decode_batch(ctx, factory, geom, batch, hist_capacities, gated, base_passed))
            if dev.type == "cuda":  # this batch's caches are gone: hand their blocks back before the next size
                torch.cuda.empty_cache()


def time_decode_batch(ctx: Context, factory: Callable[[torch.device], Family], geom, batch: int,
                      hist_capacities: List[int], gated: Dict[int, List[Tuple[str, dict]]], base_ok: bool) -> None:
    """Everything timed at one (geometry, batch): the classic step once, commit once per batch,
    then per B the replay variants that passed their gates."""
    args = ctx.args
    dev = ctx.device
    fam = factory(dev)
    sec = fam.section
    n_sets = n_cache_sets(ctx, batch * fam.state_row_bytes())
    n_slots = n_sets * batch
    params = fam.make_params()
    state = fam.make_state(n_slots)
    # Each set is a random subset of the slots (serving's slot ids are scattered too).
    perm = torch.randperm(n_slots, generator=torch.Generator().manual_seed(args.seed + batch)).to(torch.int32)
    sets_slots = [perm[s * batch:(s + 1) * batch].to(dev) for s in range(n_sets)]
    set_ids = [s.cpu().numpy() for s in sets_slots]
    inputs = [fam.make_inputs(batch) for _ in range(n_sets)]
    out = fam.make_out(batch)

    base_row: Dict[str, dict] = {}
    if base_ok:
        calls = [lambda s=s: fam.state_update(inputs[s], params, state, sets_slots[s], out) for s in range(n_sets)]
        ctx.guarded(f"{fam.base_kernel} {geom.name} batch={batch}", lambda: base_row.update(row=ctx.add_row(
            section=sec, kernel=fam.base_kernel, geometry=geom.name, batch=batch, B=None,
            timing=per_call(ctx.timer.time(calls), n_sets), nbytes=fam.base_bytes(batch), n_sets=n_sets)))
    base_us = base_row["row"]["us"] if base_row else None
    time_commit(ctx, batch, hist_capacities[0], sets_slots, n_slots)

    for B in hist_capacities:
        variants = gated.get(B, [])
        if not variants:
            continue
        if ctx.budget.exhausted():
            ctx.note_skip(f"{sec} {geom.name} batch={batch} B={B}: budget {args.budget_s:.0f}s spent")
            continue
        T, R = 1, B + 1
        # Full-batch check against the classic step on the device (cheap next to the timing): half
        # the rows in phase, half at mixed phases.
        if base_ok and batch > 1 and not args.no_batch_check:
            delays = [0 if r < batch // 2 else r % B for r in range(batch)]
            passed = {}
            ctx.guarded(f"batch check {sec} {geom.name} batch={batch} B={B}", lambda: passed.update(cycle_check(
                ctx, factory, B, batch, delays, pad_rows=[], kernels=list(variants), ref_device=dev,
                steps_after=B + 2, label="batch")))
            variants = [(n, vk) for n, vk in variants if passed.get(n)]

        rings = fam.make_rings(n_slots, R, params)
        phases = np.zeros(n_slots, dtype=np.int64)
        if args.stagger:  # phase follows the row position within its set
            for ids in set_ids:
                phases[ids] = np.arange(batch) % B
        all_slots = torch.arange(n_slots, dtype=torch.int32, device=dev)
        snaps, host = cursor_snapshots(all_slots, phases, n_slots, B, R, dev)
        if not args.stagger:
            # In phase: steps 0..B-2 have no flush row, step B-1 has every row flushing.
            for j in range(B):
                want = 1 if j == B - 1 else 0
                if not (host[j][1] == want).all():
                    raise RuntimeError(f"cursor snapshot {j}: expected flush={want} on every slot, "
                                       f"got {host[j][1].tolist()}")

        def step_bytes(j, s):
            return fam.decode_bytes(host[j][0][set_ids[s]], host[j][1][set_ids[s]])

        phases_to_time = [("cycle", list(range(B)))]
        if not args.stagger:
            phases_to_time += [("nonflush", list(range(B - 1))), ("flush", [B - 1])]
        for vname, vk in variants:
            for what, js in phases_to_time:
                if ctx.budget.exhausted():
                    ctx.note_skip(f"{vname}_{what} {geom.name} batch={batch} B={B}: budget spent")
                    continue
                # Step-major order: between two visits of one set every other set is touched, as
                # every other layer is between two steps of one layer in serving.
                order = [(j, s) for j in js for s in range(n_sets)]
                nbytes = sum(step_bytes(j, s) for j, s in order) / len(order)
                if args.commit_in_cycle and what == "cycle":
                    live = snaps[0].clone()
                    calls_state = {"live": live}
                    ones = torch.ones(batch, dtype=torch.int32, device=dev)

                    def step_and_commit(s, vk=vk, live=live, ones=ones):
                        fam.decode(inputs[s], params, state, rings, sets_slots[s], live, out, **vk)
                        commit(sets_slots[s], ones, live, B, T, R)

                    calls = [lambda s=s: step_and_commit(s) for _, s in order]
                    kernel = f"{vname}_cycle_commit"
                    nbytes += commit_bytes(batch)
                else:
                    calls = [lambda j=j, s=s, vk=vk: fam.decode(inputs[s], params, state, rings, sets_slots[s],
                                                                snaps[j], out, **vk) for j, s in order]
                    kernel = f"{vname}_{what}"

                def time_item(calls=calls, kernel=kernel, nbytes=nbytes, order=order):
                    t = per_call(ctx.timer.time(calls), len(order))
                    if kernel.endswith("_cycle_commit"):
                        # Every replay ran whole cycles, so the live cursors must be back at the
                        # phase they started from (hist and flush; start moves on by B per cycle).
                        live_now = calls_state["live"]
                        if not (torch.equal(live_now.hist, snaps[0].hist) and torch.equal(live_now.flush, snaps[0].flush)):
                            raise RuntimeError("--commit-in-cycle: the cursors did not return to their phase after "
                                               "whole cycles; the timed steps were not the intended ones")
                    ctx.add_row(section=sec, kernel=kernel, geometry=geom.name, batch=batch, B=B, timing=t,
                                nbytes=nbytes, n_sets=n_sets, base_us=base_us,
                                note=("rows at mixed phases" if args.stagger else ""))

                ctx.guarded(f"{kernel} {geom.name} batch={batch} B={B}", time_item)


def per_call(t: Timing, n: int) -> Timing:
    return Timing(t.median_s / n, t.min_s / n, t.max_s / n, t.reps, t.method)


def section_m2(ctx: Context) -> None:
    geoms = MAMBA2_TINY if ctx.args.tiny else [g for g in MAMBA2_GEOMETRIES if ctx.geometry_selected(g.name)]
    if not geoms:
        return
    st, act = DTYPES[ctx.args.state_dtype], DTYPES[ctx.args.act_dtype]
    run_decode_section(ctx, lambda g, d: Mamba2Family(g, st, act, d, ctx.generator_for(d),
                                                      with_z=ctx.args.with_z), geoms)


def section_gdn(ctx: Context) -> None:
    geoms = GDN_TINY if ctx.args.tiny else [g for g in GDN_GEOMETRIES if ctx.geometry_selected(g.name)]
    if not geoms:
        return
    st, act = DTYPES[ctx.args.state_dtype], DTYPES[ctx.args.act_dtype]
    run_decode_section(ctx, lambda g, d: GDNFamily(g, st, act, d, ctx.generator_for(d)), geoms)


# Sections run in this order; `--sections` picks a subset. A new section is one function here.
SECTIONS: Dict[str, Callable[[Context], None]] = {
    "m2": section_m2,
    "gdn": section_gdn,
}


# ---------------------------------------------------------------------------------------------
# Copy bandwidth
# ---------------------------------------------------------------------------------------------


def measure_copy_bw(ctx: Context) -> None:
    nbytes = int(ctx.args.copy_gb * 2**30)
    n = nbytes // 4
    src = torch.randn(n, device=ctx.device, generator=ctx.generator_for(ctx.device))
    dst = torch.empty_like(src)
    # Two ways to copy: dst.copy_(src) becomes a memcpy node inside a CUDA graph, which on the H200
    # measured ~2.8 TB/s (the copy engines, it seems), while an elementwise kernel streams through
    # the SMs as our kernels do. The faster of the two is the roofline the % column divides by.
    variants = [("d2d_copy", lambda: dst.copy_(src)), ("d2d_copy_kernel", lambda: torch.neg(src, out=dst))]
    best = 0.0
    for name, fn in variants:
        t = ctx.timer.time([fn])
        best = max(best, copy_bytes(n * 4) / t.median_s / 1e9)
        ctx.add_row(section="copy", kernel=name, geometry="-", batch=0, B=None, timing=t,
                    nbytes=copy_bytes(n * 4), n_sets=1,
                    note=f"{n * 4 / 2**30:.2f} GiB buffer, read + write counted")
    ctx.copy_gbps = best


# ---------------------------------------------------------------------------------------------
# Output: tables, JSON, plot
# ---------------------------------------------------------------------------------------------


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def format_table(rows: List[dict]) -> str:
    cols = [("kernel", "kernel", "<24", None), ("geometry", "geometry", "<21", None), ("batch", "batch", ">5", None),
            ("B", "B", ">4", None), ("us/step", "us", ">10", ".2f"), ("x base", "speedup_vs_base", ">7", ".2f"),
            ("seed us", "seed_us", ">8", ".1f"), ("x seed", "speedup_vs_seed", ">7", ".2f"),
            ("GB/s", "gbps", ">8", ".0f"), ("% copy", "copy_frac", ">7", ".1%")]
    lines = ["  ".join(format(h, a) for h, _, a, _ in cols)]
    lines.append("-" * len(lines[0]))
    for r in rows:
        cells = []
        for _, key, align, spec in cols:
            v = r.get(key)
            if key == "batch" and r["kernel"].startswith("d2d_copy"):
                v = None
            s = _fmt(v, spec) if spec else ("-" if v is None else str(v))
            cells.append(format(s, align))
        lines.append("  ".join(cells))
    return "\n".join(lines)


PHASE_ORDER = ["cycle", "cycle_commit", "nonflush", "flush"]


def sort_rows(rows: List[dict]) -> List[dict]:
    """copy first, then per section / geometry / batch: the baseline, then per B and variant the
    cycle, non-flush and flush rows; commit rows last."""
    order = {name: i for i, name in enumerate(SECTIONS)}

    def key(r):
        sec = -1 if r["section"] == "copy" else order.get(r["section"], len(order))
        variant, phase = r["kernel"], 0
        for i, ph in enumerate(PHASE_ORDER):
            if r["kernel"].endswith("_" + ph):
                variant, phase = r["kernel"][: -len(ph) - 1], i
        return (sec, r["geometry"], r["batch"], r["B"] or 0, variant, phase)
    return sorted(rows, key=key)


def short_rows(rows: List[dict]) -> List[dict]:
    return [r for r in sort_rows(rows)
            if r["kernel"].startswith("d2d_copy") or r["kernel"].endswith("_base") or "_cycle" in r["kernel"]
            or (r["kernel"].endswith("flush") and r["batch"] == 256 and r["B"] == 16)]


def write_plot(ctx: Context, path: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot skipped"
    cyc = [r for r in ctx.rows if "_cycle" in r["kernel"] and r["speedup_vs_base"]]
    geoms = sorted({r["geometry"] for r in cyc})
    if not geoms:
        return "no cycle rows with a baseline: plot skipped"
    ncols = min(2, len(geoms))
    nrows = math.ceil(len(geoms) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(geoms):]:
        ax.set_visible(False)
    for ax, geom in zip(axes.flat, geoms):
        series = sorted({(r["kernel"], r["B"]) for r in cyc if r["geometry"] == geom})
        colour_of = {}
        for kernel, B in series:
            pts = sorted((r["batch"], r["speedup_vs_base"]) for r in cyc
                         if r["geometry"] == geom and r["kernel"] == kernel and r["B"] == B)
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{kernel} B={B}")
            colour_of[(kernel, B)] = line.get_color()
        if ctx.anchors_apply():
            # The seed's speedup over its own baseline (same H200 method), B = 16, dashed.
            for kernel in sorted({k for k, _ in series}):
                seed = SEED_ANCHOR_US.get((kernel, geom))
                seed_base = SEED_ANCHOR_US.get((kernel.split("_")[0] + "_base", geom))
                if not seed or not seed_base:
                    continue
                pts = sorted((b, seed_base[(b, None)] / us) for (b, B), us in seed.items()
                             if B == 16 and (b, None) in seed_base)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", alpha=0.6,
                        color=colour_of.get((kernel, 16)), label=f"seed {kernel} B=16")
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch")
        ax.set_ylabel("speedup vs classic step (same run)")
        ax.set_title(geom)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def metadata(ctx: Context) -> dict:
    dev = ctx.device
    meta = dict(time_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                torch=torch.__version__, cuda=torch.version.cuda, python=platform.python_version(),
                device=(torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"),
                l2_bytes=ctx.l2_bytes, copy_gbps=ctx.copy_gbps, args=vars(ctx.args).copy(),
                elapsed_s=ctx.budget.elapsed(),
                anchors=dict(source="/work/shared/anchors/h200-seed-triton.json (seed Triton kernels, H200)",
                             copy_gbps=SEED_ANCHOR_COPY_GBPS, applied=ctx.anchors_apply()),
                bytes_model={name: fn.__doc__ for name, fn in [
                    ("mamba2_state_update", mamba2_state_update_bytes), ("mamba2_decode", mamba2_decode_bytes),
                    ("mamba2_ring_entry", mamba2_ring_entry_bytes), ("mamba2_token_io", mamba2_token_io_bytes),
                    ("gdn_state_update", gdn_state_update_bytes), ("gdn_decode", gdn_decode_bytes),
                    ("gdn_ring_entry", gdn_ring_entry_bytes), ("gdn_token_io", gdn_token_io_bytes),
                    ("commit", commit_bytes), ("copy", copy_bytes)]})
    return meta


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def _int_list(text: str) -> List[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _str_list(text: str) -> List[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m replayssm_ext.benchmark",
        description="Classic decode step vs ReplaySSM decode (Mamba-2, GDN): CUDA-graph timing of whole flush "
                    "cycles, analytic bytes, fraction of copy bandwidth. See bench/README.md.")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true",
                   help="small geometries, batches 1,3, B=4, few reps (a smoke test; works with --device cpu)")
    p.add_argument("--quick", action="store_true", help="batch 1 and 256, B=16 only")
    p.add_argument("--sections", type=_str_list, default=list(SECTIONS),
                   help=f"comma list of sections to run, from {','.join(SECTIONS)} (default all)")
    p.add_argument("--geometries", type=_str_list, default=None,
                   help="comma list of geometry names to run (default all): "
                        + ", ".join(g.name for g in MAMBA2_GEOMETRIES + GDN_GEOMETRIES))
    p.add_argument("--batches", type=_int_list, default=None, help="comma list (default 1,64,256,512)")
    p.add_argument("--hist-capacities", "-B", type=_int_list, default=None,
                   help="history capacities B, comma list (default 8,16,32)")
    p.add_argument("--routes", type=_str_list, default=["output_only", "state_and_output"],
                   help="Mamba-2 decode routes to time (default output_only,state_and_output)")
    p.add_argument("--state-dtype", choices=sorted(DTYPES), default="fp32", help="checkpoint dtype (default fp32)")
    p.add_argument("--act-dtype", choices=sorted(DTYPES), default="bf16", help="activation / ring dtype (default bf16)")
    p.add_argument("--with-z", action="store_true", help="Mamba-2 with the z gate (default off, as the anchors)")
    p.add_argument("--stagger", action="store_true",
                   help="rows at mixed phases (row r at phase r %% B): every step flushes ~batch/B rows; "
                        "only the cycle is timed")
    p.add_argument("--commit-in-cycle", action="store_true",
                   help="time the cycle with a commit after every step of every layer (live cursors) instead of "
                        "the per-step cursor snapshots the commit op produced beforehand")
    p.add_argument("--budget-s", type=float, default=240.0,
                   help="wall-time budget in seconds; configurations left when it is spent are skipped with a note "
                        "(default 240)")
    p.add_argument("--target-ms", type=float, default=None,
                   help="timed replays per measurement last about this long (default 40 ms; --tiny 5 ms)")
    p.add_argument("--min-reps", type=int, default=None, help="fewest timed replays (default 5; --tiny 3)")
    p.add_argument("--max-reps", type=int, default=None, help="most timed replays (default 200; --tiny 5)")
    p.add_argument("--min-calls", type=int, default=16,
                   help="a timed sequence is repeated until it has at least this many launches (default 16)")
    p.add_argument("--no-graphs", action="store_true", help="CUDA: time eager launches between events")
    p.add_argument("--l2-multiple", type=float, default=4.0,
                   help="rotate cache sets so this many L2 sizes of state are touched between visits (default 4)")
    p.add_argument("--max-sets", type=int, default=128, help="most cache sets (default 128)")
    p.add_argument("--sets", type=int, default=None, help="use exactly this many cache sets (default: from L2)")
    p.add_argument("--copy-gb", type=float, default=None, help="copy-bandwidth buffer in GiB (default 1; --tiny 0.03)")
    p.add_argument("--no-batch-check", action="store_true",
                   help="skip the full-batch check against the device classic step (the small gate still runs)")
    p.add_argument("--gate-out-tol", type=float, default=None,
                   help="gate bound on ||out - ref|| / ||ref|| per step (default 3e-2 when the state or act dtype is "
                        "bf16/fp16, 1e-3 when both are fp32)")
    p.add_argument("--gate-state-tol", type=float, default=None,
                   help="gate bound on the flushed checkpoint's relative error (default 1e-2 for a bf16/fp16 state or "
                        "act, 1e-3 otherwise)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="directory for bench.json and speedup.png (default: not written)")
    args = p.parse_args(argv)

    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"--sections: unknown {unknown}, expected a subset of {list(SECTIONS)}")
    bad_routes = [r for r in args.routes if r not in ("output_only", "state_and_output")]
    if bad_routes:
        p.error(f"--routes: unknown {bad_routes}, expected output_only and/or state_and_output")
    known = {g.name for g in MAMBA2_GEOMETRIES + GDN_GEOMETRIES}
    if args.geometries and not set(args.geometries) <= known:
        p.error(f"--geometries: unknown {sorted(set(args.geometries) - known)}, expected from {sorted(known)}")
    if args.tiny:
        args.batches = args.batches or [1, 3]
        args.hist_capacities = args.hist_capacities or [4]
        defaults = dict(target_ms=5.0, min_reps=3, max_reps=5, copy_gb=0.03, sets=args.sets or 2)
    elif args.quick:
        args.batches = args.batches or [1, 256]
        args.hist_capacities = args.hist_capacities or [16]
        defaults = dict(target_ms=40.0, min_reps=5, max_reps=200, copy_gb=1.0)
    else:
        args.batches = args.batches or [1, 64, 256, 512]
        args.hist_capacities = args.hist_capacities or [8, 16, 32]
        defaults = dict(target_ms=40.0, min_reps=5, max_reps=200, copy_gb=1.0)
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.min_reps < 1 or args.max_reps < args.min_reps:
        p.error(f"need 1 <= --min-reps <= --max-reps, got {args.min_reps} and {args.max_reps}")
    low_precision = args.act_dtype != "fp32" or args.state_dtype != "fp32"
    if args.gate_out_tol is None:
        args.gate_out_tol = 3e-2 if low_precision else 1e-3
    if args.gate_state_tol is None:
        args.gate_state_tol = 1e-2 if low_precision else 1e-3
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.device == "cuda" and not torch.cuda.is_available():
        print("replayssm benchmark: --device cuda but torch sees no CUDA device (use --device cpu --tiny for the "
              "smoke test)", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    torch.manual_seed(args.seed)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size if dev.type == "cuda" else 0
    timer = Timer(dev, use_graphs=not args.no_graphs, target_s=args.target_ms * 1e-3, min_reps=args.min_reps,
                  max_reps=args.max_reps, min_calls=args.min_calls)
    ctx = Context(args=args, device=dev, timer=timer, budget=Budget(args.budget_s), l2_bytes=l2)
    print(f"replayssm benchmark on {metadata(ctx)['device']} (torch {torch.__version__}, L2 {l2 / 2**20:.0f} MiB): "
          f"sections={','.join(args.sections)} batches={args.batches} B={args.hist_capacities} "
          f"state={args.state_dtype} act={args.act_dtype} z={'on' if args.with_z else 'off'} "
          f"{'stagger ' if args.stagger else ''}{'commit-in-cycle ' if args.commit_in_cycle else ''}"
          f"budget={args.budget_s:.0f}s")
    if dev.type == "cpu":
        print("  (CPU: the ops are the Python reference; times are wall clock and say nothing about GPU speed)")

    try:
        if not ctx.guarded("d2d copy", lambda: measure_copy_bw(ctx)):
            ctx.note_error("no copy bandwidth: the % copy column stays empty")
        for name in args.sections:
            ctx.log(f"section {name}")
            SECTIONS[name](ctx)
    except FatalDeviceError as e:
        ctx.note_error(f"run stopped: {e}")

    rows = sort_rows(ctx.rows)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump(dict(meta=metadata(ctx), rows=rows, gates=ctx.gates, skipped=ctx.skipped, errors=ctx.errors),
                      f, indent=1, default=str)
        with open(os.path.join(args.out, "table.txt"), "w") as f:
            f.write(format_table(rows) + "\n")
        note = write_plot(ctx, os.path.join(args.out, "speedup.png"))
        print(f"\nwrote {args.out}/bench.json, table.txt" + (f"; {note}" if note else ", speedup.png"))
    else:
        print("\n(no --out: JSON and plot not written)")

    print("\nAll rows (us per layer-step; x base = classic step time / this time; x seed = the seed's anchor time / "
          "this time; GB/s from the analytic bytes; % copy = of the d2d copy bandwidth measured above):")
    print(format_table(rows))
    gates_failed = [g for g in ctx.gates if not g["passed"]]
    print(f"\ngates: {len(ctx.gates) - len(gates_failed)}/{len(ctx.gates)} passed; skipped: {len(ctx.skipped)}; "
          f"errors: {len(ctx.errors)}; elapsed {ctx.budget.elapsed():.1f}s")
    for e in ctx.errors:
        print(f"  ERROR: {e}")
    print("\nSummary (baselines, cycles, flush steps at batch 256 B=16):")
    print(format_table(short_rows(rows)))
    return 1 if ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
