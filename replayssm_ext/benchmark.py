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

Section ``spec`` (Mamba-2 and GDN speculative verify): ``*_spec_verify`` (T tokens per row,
packed) over whole cycles with accepted lengths drawn from a fixed seeded distribution and
committed by the real ``commit`` op, against the classic step with one state snapshot per draft
(``*_state_update`` with ``cu_seqlens`` / ``snapshot_slots``, vLLM's slot rotation), same inputs
and accepted lengths; gated against the CPU reference first. Section ``plan``: the planner's
concurrency table (``cache.plan_concurrency``), no device work.

Sections are functions in ``SECTIONS``; a new section is one more function registered there.
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
# Key: (kernel, geometry) -> {(batch, B): us}; baselines have B = None. tests/test_benchmark_smoke.py
# compares both anchor tables with the file where it is present (until session 9, 162 of the 232
# decode entries had come from elsewhere: mostly batch 64 / 512 and B = 8 / 32).
SEED_ANCHOR_COPY_GBPS = 4197.0
# Our kernel names -> the anchor file's, where they differ.
SEED_ANCHOR_KERNELS = {"m2_base": "m2_base_decode", "gdn_base": "gdn_base_decode", "gdn_cycle": "gdn_rep_cycle",
                       "gdn_nonflush": "gdn_rep_nonflush", "gdn_flush": "gdn_rep_flush",
                       "m2_spec_cycle": "m2_spec_rep_cycle", "gdn_spec_cycle": "gdn_spec_rep_cycle"}
SEED_ANCHOR_US: Dict[Tuple[str, str], Dict[Tuple[int, Optional[int]], float]] = {
    ("m2_base", "nemotron3-nano-4b"): {(1, None): 4.6, (64, None): 155.0, (256, None): 610.9, (512, None): 1215.0},
    ("m2_oo_cycle", "nemotron3-nano-4b"): {(1, 8): 7.0, (64, 8): 89.1, (256, 8): 316.0, (512, 8): 643.4, (1, 16): 6.8, (64, 16): 97.3, (256, 16): 356.0, (512, 16): 708.9, (1, 32): 7.4, (64, 32): 100.2, (256, 32): 380.3, (512, 32): 760.0},
    ("m2_oo_nonflush", "nemotron3-nano-4b"): {(1, 8): 6.8, (64, 8): 77.3, (256, 8): 268.7, (512, 8): 544.8, (1, 16): 6.7, (64, 16): 89.5, (256, 16): 323.5, (512, 16): 641.7, (1, 32): 7.3, (64, 32): 96.3, (256, 32): 364.1, (512, 32): 724.7},
    ("m2_oo_flush", "nemotron3-nano-4b"): {(1, 8): 7.8, (64, 8): 172.9, (256, 8): 646.7, (512, 8): 1333.4, (1, 16): 7.7, (64, 16): 214.0, (256, 16): 839.4, (512, 16): 1720.1, (1, 32): 8.3, (64, 32): 222.9, (256, 32): 882.9, (512, 32): 1855.1},
    ("m2_so_cycle", "nemotron3-nano-4b"): {(1, 8): 5.9, (64, 8): 100.1, (256, 8): 383.9, (512, 8): 776.1, (1, 16): 5.9, (64, 16): 98.0, (256, 16): 374.3, (512, 16): 758.2, (1, 32): 6.5, (64, 32): 108.1, (256, 32): 401.1, (512, 32): 807.2},
    ("m2_so_nonflush", "nemotron3-nano-4b"): {(1, 8): 5.7, (64, 8): 91.9, (256, 8): 350.9, (512, 8): 708.3, (1, 16): 5.8, (64, 16): 93.7, (256, 16): 357.2, (512, 16): 722.6, (1, 32): 6.4, (64, 32): 105.8, (256, 32): 391.9, (512, 32): 787.4},
    ("m2_so_flush", "nemotron3-nano-4b"): {(1, 8): 7.2, (64, 8): 157.6, (256, 8): 614.6, (512, 8): 1247.5, (1, 16): 7.3, (64, 16): 162.3, (256, 16): 632.6, (512, 16): 1293.9, (1, 32): 8.8, (64, 32): 177.7, (256, 32): 683.4, (512, 32): 1420.9},
    ("m2_base", "nemotron3-super-120b"): {(1, None): 4.6, (64, None): 143.1, (256, None): 567.2, (512, None): 1109.0},
    ("m2_oo_cycle", "nemotron3-super-120b"): {(1, 8): 7.0, (64, 8): 94.3, (256, 8): 332.5, (512, 8): 668.6, (1, 16): 6.8, (64, 16): 102.7, (256, 16): 382.2, (512, 16): 752.6, (1, 32): 7.5, (64, 32): 105.6, (256, 32): 397.8, (512, 32): 794.9},
    ("m2_oo_nonflush", "nemotron3-super-120b"): {(1, 8): 6.9, (64, 8): 81.9, (256, 8): 282.2, (512, 8): 568.5, (1, 16): 6.8, (64, 16): 94.4, (256, 16): 348.2, (512, 16): 683.1, (1, 32): 7.4, (64, 32): 101.3, (256, 32): 381.5, (512, 32): 760.1},
    ("m2_oo_flush", "nemotron3-super-120b"): {(1, 8): 8.0, (64, 8): 180.3, (256, 8): 685.3, (512, 8): 1368.8, (1, 16): 7.9, (64, 16): 226.4, (256, 16): 893.6, (512, 16): 1796.6, (1, 32): 8.5, (64, 32): 240.4, (256, 32): 906.2, (512, 32): 1872.8},
    ("m2_so_cycle", "nemotron3-super-120b"): {(1, 8): 5.9, (64, 8): 98.0, (256, 8): 374.6, (512, 8): 756.1, (1, 16): 5.8, (64, 16): 95.0, (256, 16): 364.0, (512, 16): 731.1, (1, 32): 6.5, (64, 32): 103.1, (256, 32): 380.5, (512, 32): 756.3},
    ("m2_so_nonflush", "nemotron3-super-120b"): {(1, 8): 5.7, (64, 8): 88.9, (256, 8): 337.9, (512, 8): 681.1, (1, 16): 5.7, (64, 16): 90.4, (256, 16): 345.3, (512, 16): 692.5, (1, 32): 6.4, (64, 32): 100.7, (256, 32): 370.6, (512, 32): 734.5},
    ("m2_so_flush", "nemotron3-super-120b"): {(1, 8): 7.0, (64, 8): 162.2, (256, 8): 632.0, (512, 8): 1281.2, (1, 16): 7.1, (64, 16): 165.3, (256, 16): 647.2, (512, 16): 1312.8, (1, 32): 8.7, (64, 32): 179.6, (256, 32): 684.2, (512, 32): 1441.2},
    ("gdn_base", "qwen3.5-4b"): {(1, None): 5.9, (64, None): 74.6, (256, None): 275.2, (512, None): 544.0},
    ("gdn_cycle", "qwen3.5-4b"): {(1, 8): 7.6, (64, 8): 50.1, (256, 8): 173.6, (512, 8): 334.9, (1, 16): 7.3, (64, 16): 47.5, (256, 16): 162.2, (512, 16): 317.0, (1, 32): 8.5, (64, 32): 52.6, (256, 32): 180.5, (512, 32): 354.6},
    ("gdn_nonflush", "qwen3.5-4b"): {(1, 8): 7.0, (64, 8): 43.6, (256, 8): 147.0, (512, 8): 284.1, (1, 16): 7.1, (64, 16): 44.1, (256, 16): 148.6, (512, 16): 290.7, (1, 32): 8.3, (64, 32): 50.8, (256, 32): 173.3, (512, 32): 340.6},
    ("gdn_flush", "qwen3.5-4b"): {(1, 8): 11.2, (64, 8): 96.2, (256, 8): 359.3, (512, 8): 691.4, (1, 16): 11.2, (64, 16): 98.6, (256, 16): 367.9, (512, 16): 712.8, (1, 32): 12.7, (64, 32): 108.5, (256, 32): 403.7, (512, 32): 788.4},
    ("gdn_base", "qwen3.5-122b"): {(1, None): 7.1, (64, None): 139.5, (256, None): 539.1, (512, None): 1070.0},
    ("gdn_cycle", "qwen3.5-122b"): {(1, 8): 7.9, (64, 8): 89.8, (256, 8): 332.7, (512, 8): 656.6, (1, 16): 7.7, (64, 16): 84.6, (256, 16): 310.9, (512, 16): 620.0, (1, 32): 8.8, (64, 32): 94.4, (256, 32): 346.2, (512, 32): 693.2},
    ("gdn_nonflush", "qwen3.5-122b"): {(1, 8): 7.4, (64, 8): 76.1, (256, 8): 279.9, (512, 8): 553.8, (1, 16): 7.4, (64, 16): 77.6, (256, 16): 283.9, (512, 16): 566.7, (1, 32): 8.6, (64, 32): 90.8, (256, 32): 332.1, (512, 32): 665.2},
    ("gdn_flush", "qwen3.5-122b"): {(1, 8): 11.6, (64, 8): 185.7, (256, 8): 703.0, (512, 8): 1377.3, (1, 16): 11.7, (64, 16): 190.0, (256, 16): 719.1, (512, 16): 1417.6, (1, 32): 13.2, (64, 32): 206.3, (256, 32): 783.6, (512, 32): 1565.0},
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


def cu_seqlens_bytes(batch: int) -> int:
    """cu_seqlens (batch + 1,) int32, read once per call."""
    return (batch + 1) * 4


def mamba2_spec_verify_bytes(g: Mamba2Geometry, hist: np.ndarray, flush: np.ndarray, n: int, sb: int, a: int,
                             with_z: bool) -> int:
    """ReplaySSM spec verify step, per live row with cursor (hist, flush) and n window tokens:
    checkpoint read once (+ write on a flush row), the `hist` history entries read, the n window
    entries written, n tokens of io, slot id, cursors; per call cu_seqlens and the parameters."""
    hist = np.asarray(hist, dtype=np.int64)
    flush = np.asarray(flush, dtype=np.int64)
    rows = hist.size
    e = mamba2_ring_entry_bytes(g, a)
    total = (mamba2_state_bytes(g, sb) * int((1 + flush).sum())
             + e * int(hist.sum()) + e * n * rows
             + (n * mamba2_token_io_bytes(g, a, with_z) + SLOT_ID_BYTES + CURSOR_BYTES) * rows)
    return total + cu_seqlens_bytes(rows) + mamba2_param_bytes(g)


def mamba2_spec_snapshot_bytes(g: Mamba2Geometry, batch: int, n: int, T: int, sb: int, a: int, with_z: bool) -> int:
    """Classic spec step with per-draft snapshots (mamba2_state_update with cu_seqlens and
    snapshot_slots), per row: one state read, n states written (one per token), n tokens of io,
    the read slot id and the T snapshot slot ids; per call cu_seqlens and the parameters."""
    per_row = ((1 + n) * mamba2_state_bytes(g, sb) + n * mamba2_token_io_bytes(g, a, with_z)
               + SLOT_ID_BYTES + T * SLOT_ID_BYTES)
    return batch * per_row + cu_seqlens_bytes(batch) + mamba2_param_bytes(g)


def gdn_spec_verify_bytes(g: GDNGeometry, hist: np.ndarray, flush: np.ndarray, n: int, sb: int, a: int) -> int:
    """ReplaySSM GDN spec verify step, per live row: checkpoint read once (+ write on flush),
    `hist` entries read, n window entries written, n tokens of io, slot id, cursors; per call
    cu_seqlens and the parameters."""
    hist = np.asarray(hist, dtype=np.int64)
    flush = np.asarray(flush, dtype=np.int64)
    rows = hist.size
    e = gdn_ring_entry_bytes(g, a)
    total = (gdn_state_bytes(g, sb) * int((1 + flush).sum())
             + e * int(hist.sum()) + e * n * rows
             + (n * gdn_token_io_bytes(g, a) + SLOT_ID_BYTES + CURSOR_BYTES) * rows)
    return total + cu_seqlens_bytes(rows) + gdn_param_bytes(g)


def gdn_spec_snapshot_bytes(g: GDNGeometry, batch: int, n: int, T: int, sb: int, a: int) -> int:
    """Classic GDN spec step with per-draft snapshots, per row: one state read, n states written,
    n tokens of io, the read slot id and the T snapshot slot ids; per call cu_seqlens, parameters."""
    per_row = ((1 + n) * gdn_state_bytes(g, sb) + n * gdn_token_io_bytes(g, a)
               + SLOT_ID_BYTES + T * SLOT_ID_BYTES)
    return batch * per_row + cu_seqlens_bytes(batch) + gdn_param_bytes(g)


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
    # Speculative verify (section spec): n = T tokens per row, packed, rows given by cu_seqlens.
    spec_op: str
    spec_kernel: str       # replay row name prefix
    spec_base_kernel: str  # per-draft snapshot baseline row name
    def spec_verify(self, inp, params, state, rings, cu_seqlens, slots, cur: Cursors, out, T: int) -> None: ...
    def state_update_snapshots(self, inp, params, state, slots, out, cu_seqlens, snapshot_slots) -> None: ...
    def spec_bytes(self, hist, flush, n: int) -> int: ...
    def spec_base_bytes(self, batch: int, n: int, T: int) -> int: ...


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

    spec_op = "mamba2_spec_verify"
    spec_kernel = "m2_spec"
    spec_base_kernel = "m2_spec_base"

    def spec_verify(self, inp, params, state, rings, cu_seqlens, slots, cur, out, T):
        OPS.mamba2_spec_verify(inp["x"], inp["dt"], params["A"], inp["B"], inp["C"], params["D"], inp["z"],
                               params["dt_bias"], True, cu_seqlens, slots, cur.hist, cur.start, cur.flush, state,
                               rings["ring_x"], rings["ring_B"], rings["ring_dt"], out, T)

    def state_update_snapshots(self, inp, params, state, slots, out, cu_seqlens, snapshot_slots):
        OPS.mamba2_state_update(inp["x"], inp["dt"], params["A"], inp["B"], inp["C"], params["D"], inp["z"],
                                params["dt_bias"], True, slots, state, out, cu_seqlens, snapshot_slots)

    def spec_bytes(self, hist, flush, n):
        return mamba2_spec_verify_bytes(self.geom, hist, flush, n, self.sb, self.a, self.with_z)

    def spec_base_bytes(self, batch, n, T):
        return mamba2_spec_snapshot_bytes(self.geom, batch, n, T, self.sb, self.a, self.with_z)


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

    spec_op = "gdn_spec_verify"
    spec_kernel = "gdn_spec"
    spec_base_kernel = "gdn_spec_base"

    def spec_verify(self, inp, params, state, rings, cu_seqlens, slots, cur, out, T):
        OPS.gdn_spec_verify(inp["q"], inp["k"], inp["v"], inp["a"], inp["b"], params["A_log"], params["dt_bias"],
                            params["scale"], True, cu_seqlens, slots, cur.hist, cur.start, cur.flush, state,
                            rings["ring_u"], rings["ring_k"], rings["ring_g"], out, T)

    def state_update_snapshots(self, inp, params, state, slots, out, cu_seqlens, snapshot_slots):
        OPS.gdn_state_update(inp["q"], inp["k"], inp["v"], inp["a"], inp["b"], params["A_log"], params["dt_bias"],
                             params["scale"], True, slots, state, out, cu_seqlens, snapshot_slots)

    def spec_bytes(self, hist, flush, n):
        return gdn_spec_verify_bytes(self.geom, hist, flush, n, self.sb, self.a)

    def spec_base_bytes(self, batch, n, T):
        return gdn_spec_snapshot_bytes(self.geom, batch, n, T, self.sb, self.a)


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
                 min_calls: int, stream: Optional[torch.cuda.Stream] = None):
        self.device = device
        # stream: where capture, warm-up and replays run (an SM partition's stream, --sms); the
        # events are recorded on it too. None: a new stream per sequence, replays on the current one.
        self.stream = stream
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

        if self.stream is None:
            return self._time_cuda(run_all, inner, torch.cuda.Stream(self.device))
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            timing = self._time_cuda(run_all, inner, self.stream)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        return timing

    def _time_cuda(self, run_all: Callable[[], None], inner: int, stream: torch.cuda.Stream) -> Timing:
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            run_all()  # eager warm-up: surfaces argument errors before capture
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        graph = None
        if self.use_graphs:
            graph = torch.cuda.CUDAGraph()
            # torch.cuda.graph captures on a side stream of its own unless given one: an SM
            # partition's kernels must be captured on the partition's stream to run there.
            with torch.cuda.graph(graph, stream=self.stream):
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
    sm_partition: Optional[dict] = None  # --sms: the partition and its checks
    rows: List[dict] = dataclasses.field(default_factory=list)
    gates: List[dict] = dataclasses.field(default_factory=list)
    skipped: List[str] = dataclasses.field(default_factory=list)
    errors: List[str] = dataclasses.field(default_factory=list)
    commit_timed: set = dataclasses.field(default_factory=set)
    plan: List[dict] = dataclasses.field(default_factory=list)
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
                n_sets, base_us: Optional[float] = None, note: str = "", extra: Optional[dict] = None,
                anchor_us: Optional[Callable[[], Optional[float]]] = None) -> dict:
        """extra: more fields for the row (the spec section's T, accept, steps, tokens per step);
        anchor_us: where the seed's time comes from when not from SEED_ANCHOR_US (spec rows)."""
        us = timing.median_s * 1e6
        gbps = nbytes / timing.median_s / 1e9 if nbytes else None
        anchor = None
        if self.anchors_apply():
            anchor = anchor_us() if anchor_us is not None else seed_anchor_us(kernel, geometry, batch, B)
        row = dict(section=section, kernel=kernel, geometry=geometry, batch=batch, B=B, us=us,
                   us_min=timing.min_s * 1e6, us_max=timing.max_s * 1e6, reps=timing.reps, timing=timing.method,
                   bytes=nbytes, gbps=gbps,
                   copy_frac=(gbps / self.copy_gbps if gbps and self.copy_gbps else None),
                   base_us=base_us, speedup_vs_base=(base_us / us if base_us else None),
                   seed_us=anchor, speedup_vs_seed=(anchor / us if anchor else None),
                   n_sets=n_sets, note=note)
        if extra:
            row.update(extra)
        self.rows.append(row)
        spec_tag = f" T={row['T']} {row['accept']}" if "accept" in row else ""
        self.log(f"{kernel:<22} {geometry:<22} batch={batch:<4} B={str(B):<4}{spec_tag} {us:10.2f} us"
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


# ---------------------------------------------------------------------------------------------
# Speculative decoding (section spec): verify steps of T tokens per row, accepted lengths drawn
# from a fixed distribution, ReplaySSM spec verify against the classic step with per-draft
# state snapshots
# ---------------------------------------------------------------------------------------------

ACCEPT_MODES = ("all", "mean2.5")

# Mode "mean2.5": each draft is accepted with probability MEAN25_DRAFT_ACCEPT given that the
# drafts before it were (acceptance stops at the first rejection), so the accepted length a
# (the verified token + the accepted drafts, 1..T) is a truncated geometric:
# P(a = k) = alpha^(k-1) (1 - alpha) for k < T, P(a = T) = alpha^(T-1). alpha solves
# 1 + alpha + alpha^2 + alpha^3 = 2.5, i.e. a mean of 2.5 accepted of 4 at T = 4; the same alpha
# (the same drafter) at other T gives means 1.69 (T = 2) and 3.07 (T = 8). At T = 1 every mode is
# "all" (a = 1), so only "all" runs there.
MEAN25_DRAFT_ACCEPT = 0.6914139797817367


def accept_distribution(mode: str, T: int) -> np.ndarray:
    """Probabilities of accepted lengths 1..T under an accept mode (ACCEPT_MODES)."""
    if mode == "all":
        p = np.zeros(T)
        p[-1] = 1.0
        return p
    if mode == "mean2.5":
        alpha = MEAN25_DRAFT_ACCEPT
        return np.array([alpha ** (k - 1) * (1 - alpha) for k in range(1, T)] + [alpha ** (T - 1)])
    raise ValueError(f"accept mode must be one of {ACCEPT_MODES}, got {mode!r}")


def draw_accepted(mode: str, T: int, steps: int, rows: int, seed: Sequence[int]) -> np.ndarray:
    """(steps, rows) int32 accepted lengths, i.i.d. from accept_distribution, from a seeded generator."""
    rng = np.random.default_rng(list(seed))
    return rng.choice(np.arange(1, T + 1), size=(steps, rows), p=accept_distribution(mode, T)).astype(np.int32)


def spec_seed(ctx: "Context", T: int, mode: str, batch: int, purpose: int) -> List[int]:
    return [ctx.args.seed, purpose, T, ACCEPT_MODES.index(mode), batch]


# Seed anchors for spec (same file as SEED_ANCHOR_US): B = 16 (the seed's spec_block), every draft
# accepted, rows in phase, fp32 state, bf16 act. Key: (kernel, geometry) -> {(batch, T): us per
# layer-step}. The seed's replay step includes its commit (cursor read/write, 22 B per row) and its
# own scatter/precompute launch; ours times commit on its own line (once per model step).
SEED_SPEC_ANCHOR_US: Dict[Tuple[str, str], Dict[Tuple[int, int], float]] = {
    ("m2_spec_base", "nemotron3-nano-4b"): {(1, 1): 6.2, (1, 2): 8.3, (1, 4): 13.1, (1, 8): 23.2, (64, 1): 211.4, (64, 2): 291.0, (64, 4): 457.2, (64, 8): 810.0, (256, 1): 832.2, (256, 2): 1157.6, (256, 4): 1922.3, (256, 8): 3768.8, (512, 1): 1672.9, (512, 2): 2422.3, (512, 4): 4219.8, (512, 8): 7708.7},
    ("m2_spec_cycle", "nemotron3-nano-4b"): {(1, 1): 13.4, (1, 2): 13.7, (1, 4): 14.5, (1, 8): 15.6, (64, 1): 97.1, (64, 2): 105.9, (64, 4): 129.1, (64, 8): 153.2, (256, 1): 352.7, (256, 2): 387.6, (256, 4): 484.7, (256, 8): 618.4, (512, 1): 699.5, (512, 2): 775.6, (512, 4): 977.3, (512, 8): 1269.5},
    ("m2_spec_base", "nemotron3-super-120b"): {(1, 1): 5.1, (1, 2): 6.5, (1, 4): 9.1, (1, 8): 14.3, (64, 1): 143.5, (64, 2): 218.9, (64, 4): 376.6, (64, 8): 686.4, (256, 1): 567.9, (256, 2): 862.1, (256, 4): 1494.3, (256, 8): 2787.3, (512, 1): 1120.6, (512, 2): 1739.3, (512, 4): 3062.5, (512, 8): 5628.8},
    ("m2_spec_cycle", "nemotron3-super-120b"): {(1, 1): 13.6, (1, 2): 13.8, (1, 4): 14.5, (1, 8): 15.7, (64, 1): 95.5, (64, 2): 103.3, (64, 4): 120.4, (64, 8): 149.2, (256, 1): 339.9, (256, 2): 373.3, (256, 4): 448.3, (256, 8): 598.1, (512, 1): 669.5, (512, 2): 738.9, (512, 4): 903.0, (512, 8): 1210.8},
    ("gdn_spec_base", "qwen3.5-4b"): {(1, 2): 8.2, (1, 4): 13.4, (1, 8): 24.0, (64, 2): 130.3, (64, 4): 208.8, (64, 8): 372.9, (256, 2): 506.5, (256, 4): 805.4, (256, 8): 1439.7, (512, 2): 999.0, (512, 4): 1599.2, (512, 8): 2861.1},
    ("gdn_spec_cycle", "qwen3.5-4b"): {(1, 2): 11.4, (1, 4): 12.1, (1, 8): 16.6, (64, 2): 59.9, (64, 4): 67.1, (64, 8): 91.4, (256, 2): 201.4, (256, 4): 229.5, (256, 8): 326.7, (512, 2): 386.6, (512, 4): 445.9, (512, 8): 685.1},
    ("gdn_spec_base", "qwen3.5-122b"): {(1, 2): 9.4, (1, 4): 15.3, (1, 8): 27.3, (64, 2): 255.7, (64, 4): 408.6, (64, 8): 726.2, (256, 2): 1007.8, (256, 4): 1603.2, (256, 8): 2855.7, (512, 2): 2015.4, (512, 4): 3193.1, (512, 8): 5716.1},
    ("gdn_spec_cycle", "qwen3.5-122b"): {(1, 2): 11.7, (1, 4): 12.5, (1, 8): 17.2, (64, 2): 104.2, (64, 4): 118.1, (64, 8): 167.7, (256, 2): 375.2, (256, 4): 434.5, (256, 8): 669.4, (512, 2): 749.9, (512, 4): 886.3, (512, 8): 1353.8},
}
SEED_SPEC_HIST_CAPACITY = 16


def seed_spec_anchor_us(kernel: str, geometry: str, batch: int, B: int, T: int, mode: str) -> Optional[float]:
    if mode != "all" or B != SEED_SPEC_HIST_CAPACITY:
        return None
    return SEED_SPEC_ANCHOR_US.get((kernel, geometry), {}).get((batch, T))


# The per-draft snapshot baseline's slot layout (vLLM's speculative state handling): the sequence
# whose ReplaySSM slot is s owns the T snapshot slots s*T .. s*T+T-1. After prefill its state is in
# s*T (as if 1 token was accepted). A verify step of n tokens reads slot s*T + a_prev - 1 (the state
# after the last accepted token of the previous step, a_prev accepted; 1 before the first step) and
# writes the state after its token i to s*T + i, i = 0..n-1 (snapshot_slots[r] = s*T + [0..T-1]).
# The read slot is one of the written ones: the op reads it before it writes (the contract allows a
# row to write the slot it reads). The next step then reads s*T + a - 1 for the a it accepted.


def snapshot_read_slots(seq_slots: torch.Tensor, prev_accepted: torch.Tensor, T: int) -> torch.Tensor:
    """Slot each row's classic spec step reads: seq_slots*T + prev_accepted - 1 (-1 stays padding)."""
    s = seq_slots.long()
    return torch.where(s >= 0, s * T + prev_accepted.long() - 1, torch.full_like(s, -1)).to(torch.int32)


def snapshot_write_slots(seq_slots: torch.Tensor, T: int) -> torch.Tensor:
    """(rows, T) snapshot slots: seq_slots*T + [0..T-1]; a padding row's are all -1."""
    s = seq_slots.long()[:, None]
    ids = s * T + torch.arange(T, device=seq_slots.device)[None, :]
    return torch.where(s >= 0, ids, torch.full_like(ids, -1)).to(torch.int32)


def packed_cu_seqlens(rows: int, T: int, device) -> torch.Tensor:
    """Every row verifies T tokens (1 + T-1 drafts): cu_seqlens = [0, T, 2T, ...]."""
    return (torch.arange(rows + 1, dtype=torch.int32) * T).to(device)


@dataclasses.dataclass
class SpecSchedule:
    """One timed window of spec steps (see spec_schedule)."""
    snaps: List[Cursors]          # cursors step j reads (all slots, on the device)
    hist: List[np.ndarray]        # host copies per step, per slot
    flush: List[np.ndarray]
    accepted: np.ndarray          # (steps, batch): what step j accepts, per row position
    prev_accepted: np.ndarray     # (steps, batch): what the step before step j accepted
    warmup_steps: int

    @property
    def steps(self) -> int:
        return len(self.snaps)


def spec_schedule(sets_slots: List[torch.Tensor], n_slots: int, batch: int, B: int, T: int, R: int, mode: str,
                  seed: Sequence[int], device) -> SpecSchedule:
    """The cursors of whole spec cycles, produced by the real commit op.

    Accepted lengths acc[j, r] (draw_accepted) are drawn per step and row position r; the slot at
    position r of every cache set uses the same sequence, so all sets go through the same phases
    and one step count serves them all. Every slot is reset, then committed step by step:
    warm-up: until every row has flushed once (a fresh slot's first flush; the ring has then
    wrapped into its steady state); window: the following steps until every row has flushed at
    least once more. The window is what is timed; its cursors are snapshotted before every step
    (one commit apart) and checked against cursor_rules (the Python mirror of cursor.h)."""
    max_steps = 4 * (B + 2)
    acc = draw_accepted(mode, T, max_steps, batch, seed)
    all_host = torch.cat([s.cpu() for s in sets_slots]).long()
    if all_host.numel() != n_slots or torch.unique(all_host).numel() != n_slots:
        raise RuntimeError(f"spec_schedule: the cache sets must partition the {n_slots} slots")
    pos = torch.empty(n_slots, dtype=torch.int64)
    pos[all_host] = torch.arange(n_slots) % batch  # sets are consecutive chunks of `batch` slots
    all_slots = torch.arange(n_slots, dtype=torch.int32, device=device)
    pos_np = pos.numpy()
    probe = sets_slots[0].cpu().numpy()  # the slot at each row position in set 0
    cur = Cursors.empty(n_slots, device)
    reset(all_slots, cur, B, T)

    def commit_step(j):
        commit(all_slots, torch.as_tensor(acc[j][pos_np], device=device), cur, B, T, R)

    j = 0
    flushed = np.zeros(batch, dtype=bool)
    while not flushed.all():
        if j >= max_steps:
            raise RuntimeError(f"spec_schedule: no flush on every row within {max_steps} steps (B={B}, T={T})")
        flushed |= cur.flush.cpu().numpy()[probe].astype(bool)
        commit_step(j)
        j += 1
    warmup = j
    flushed[:] = False
    snaps, hists, flushes = [], [], []
    while not flushed.all():
        if j >= max_steps:
            raise RuntimeError(f"spec_schedule: no flush on every row within {max_steps} steps (B={B}, T={T})")
        snaps.append(cur.clone())
        hists.append(cur.hist.cpu().numpy().copy())
        flushes.append(cur.flush.cpu().numpy().copy())
        flushed |= flushes[-1][probe].astype(bool)
        commit_step(j)
        j += 1
    K = j - warmup

    # Every set at the same phase as set 0, and the commit op agrees with the mirror.
    for s_ids in sets_slots[1:]:
        ids = s_ids.cpu().numpy()
        for i in range(K):
            same = np.array_equal(hists[i][ids], hists[i][probe]) and np.array_equal(flushes[i][ids], flushes[i][probe])
            if not same:
                raise RuntimeError(f"spec_schedule: cache sets diverged at window step {i}")
    for r in range(min(batch, 4)):
        c = cursor_rules.reset_cursor(B, T)
        for i in range(warmup + K):
            if i >= warmup:
                h, f = hists[i - warmup][probe[r]], flushes[i - warmup][probe[r]]
                if (h, f) != (c.hist, c.flush):
                    raise RuntimeError(f"commit op and cursor_rules disagree: row {r} window step {i - warmup}: "
                                       f"op (hist={h}, flush={f}), cursor_rules (hist={c.hist}, flush={c.flush})")
            c = cursor_rules.commit_cursor(c, int(acc[i][r]), B, T, R)
    return SpecSchedule(snaps=snaps, hist=hists, flush=flushes, accepted=acc[warmup:warmup + K].copy(),
                        prev_accepted=acc[warmup - 1:warmup + K - 1].copy(), warmup_steps=warmup)


def _not_implemented(message: str) -> bool:
    return "not implemented" in message.lower()


def spec_check(ctx: Context, fam_factory: Callable[[torch.device], Family], B: int, T: int, mode: str,
               kernels: List[str], ref_device: torch.device, label: str, delays: Sequence[int] = (0, 1, 2),
               pad_rows: Sequence[int] = (1,)) -> Dict[str, Optional[bool]]:
    """Drives the kernels under test and the reference through the same spec verify steps from the
    same random checkpoint, accepted lengths drawn from the mode's distribution and committed as
    serving does, until every live row has gone through a flush step and a step after it.

    kernels: "replay" (*_spec_verify on ctx.device) and/or "base" (the classic step with
    per-draft snapshots on ctx.device). The reference is the classic step with per-draft snapshots
    (*_state_update with cu_seqlens and snapshot_slots, slot layout as snapshot_read_slots /
    snapshot_write_slots) on ref_device. Live row r joins after delays[r] steps (mixed phases; by
    default three rows at 0, 1, 2, with a padding row between them); pad_rows stay padding
    (slot -1) throughout. Rings start NaN-filled, outputs are NaN-poisoned before
    each call. Checked: every live token's output, the checkpoint a flush writes (against the
    reference state the step reads), finite outputs, padding tokens untouched, an unused slot (and
    its snapshot slots) untouched; the baseline's whole snapshot state at the end.
    Returns {kernel row name: passed}, None for a kernel whose op says it is not implemented."""
    dev = ctx.device
    fam = fam_factory(dev)
    ref_fam = fam_factory(ref_device)
    R = B + T
    delays, pad_rows = list(delays), list(pad_rows)
    batch = len(delays)
    n_rows = batch + len(pad_rows)
    live_rows = [r for r in range(n_rows) if r not in pad_rows]
    n_slots = batch + 1  # one sequence no row uses: its slots must stay untouched
    perm = torch.randperm(n_slots, generator=torch.Generator().manual_seed(ctx.args.seed + 11))
    row_slot = torch.full((n_rows,), cursor_rules.PAD_SLOT, dtype=torch.int32)
    row_slot[live_rows] = perm[:batch].to(torch.int32)
    row_delay = torch.zeros(n_rows, dtype=torch.int64)
    row_delay[live_rows] = torch.as_tensor(delays, dtype=torch.int64)
    max_steps = 4 * (B + 2) + max(delays)
    acc = torch.as_tensor(draw_accepted(mode, T, max_steps, n_rows, spec_seed(ctx, T, mode, n_rows, 1)))

    params = fam.make_params()
    ref_params = tensors_to(params, ref_device)
    state0 = fam.make_state(n_slots)
    snap_state0 = state0.repeat_interleave(T, dim=0)  # sequence s's state starts in slot s*T (and its copies)
    ref_state = snap_state0.to(ref_device).clone()
    names = {"replay": f"{fam.spec_kernel}_cycle", "base": fam.spec_base_kernel}
    under_test = {}
    for kind in kernels:
        under_test[kind] = dict(
            name=names[kind], state=(state0 if kind == "replay" else snap_state0).clone(),
            rings=fam.make_rings(n_slots, R, params, poison=True) if kind == "replay" else None,
            out=fam.make_out(n_rows * T), worst=dict(out_abs=0.0, out_rel=0.0, state_abs=0.0, state_rel=0.0),
            problems=[], raised=None)
    untouched = int(perm[batch])
    cur = Cursors.empty(n_slots, dev)
    reset(torch.arange(n_slots, dtype=torch.int32, device=dev), cur, B, T)
    cu_dev, cu_ref = packed_cu_seqlens(n_rows, T, dev), packed_cu_seqlens(n_rows, T, ref_device)
    ref_out = ref_fam.make_out(n_rows * T)
    prev_acc = torch.ones(n_rows, dtype=torch.int32)
    flush_steps = torch.zeros(n_rows, dtype=torch.int64)
    steps_after_flush = torch.zeros(n_rows, dtype=torch.int64)
    step = 0
    while True:
        if step >= max_steps:
            raise RuntimeError(f"spec gate: rows did not all flush within {max_steps} steps")
        active = row_delay <= step
        slots_host = torch.where(active, row_slot, torch.full_like(row_slot, cursor_rules.PAD_SLOT))
        live = (slots_host >= 0).nonzero().flatten()
        read_host = snapshot_read_slots(slots_host, prev_acc, T)
        write_host = snapshot_write_slots(slots_host, T)
        live_tokens = (live[:, None] * T + torch.arange(T)[None, :]).flatten()
        pad_tokens = ((slots_host < 0).nonzero().flatten()[:, None] * T + torch.arange(T)[None, :]).flatten()
        flush_host = cur.flush.cpu()
        flushing = [r for r in live.tolist() if flush_host[int(slots_host[r])]]
        inp = fam.make_inputs(n_rows * T)
        ref_inp = tensors_to(inp, ref_device)
        ref_before = ref_state[read_host[flushing].long()].clone() if flushing else None
        ref_out.fill_(float("nan"))
        ref_fam.state_update_snapshots(ref_inp, ref_params, ref_state, read_host.to(ref_device), ref_out, cu_ref,
                                       write_host.to(ref_device))
        slots_dev = slots_host.to(dev)
        for kind, k in under_test.items():
            if k["raised"] is not None:
                continue
            k["out"].fill_(float("nan"))
            try:
                if kind == "replay":
                    fam.spec_verify(inp, params, k["state"], k["rings"], cu_dev, slots_dev, cur, k["out"], T)
                else:
                    fam.state_update_snapshots(inp, params, k["state"], read_host.to(dev), k["out"], cu_dev,
                                               write_host.to(dev))
                out = k["out"].to(ref_device)
            except Exception as e:  # a kernel that rejects this case fails its gate (or is skipped), the run goes on
                k["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                k["problems"].insert(0, f"step {step}: raised {k['raised']}")
                ctx.check_device_alive()
                continue
            w = k["worst"]
            got, ref = out[live_tokens], ref_out[live_tokens]
            if not torch.isfinite(got).all():
                k["problems"].append(f"step {step}: non-finite outputs on live rows")
            a, r = rel_err(got, ref)
            w["out_abs"], w["out_rel"] = max(w["out_abs"], a), max(w["out_rel"], r)
            if pad_tokens.numel() and not torch.isnan(out[pad_tokens]).all():
                k["problems"].append(f"step {step}: a padding row's output was written")
            if kind == "replay" and flushing:
                a, r = rel_err(k["state"][slots_host[flushing].long()], ref_before)
                w["state_abs"], w["state_rel"] = max(w["state_abs"], a), max(w["state_rel"], r)
        a_now = torch.where(active, acc[step], torch.ones_like(acc[step]))
        commit(slots_dev, a_now.to(dev), cur, B, T, R)
        is_flush = torch.zeros(n_rows, dtype=torch.bool)
        is_flush[flushing] = True
        steps_after_flush += ((flush_steps > 0) & active & (slots_host >= 0)).long()
        flush_steps += is_flush.long()
        prev_acc = torch.where(active, a_now, prev_acc)
        step += 1
        if bool((steps_after_flush[live_rows] > 0).all()):
            break

    results: Dict[str, Optional[bool]] = {}
    for kind, k in under_test.items():
        name = k["name"]
        if k["raised"] is not None and _not_implemented(k["raised"]):
            ctx.note_skip(f"{name} {fam.geom.name} T={T}: the op says it is not implemented on "
                          f"{dev.type} ({k['raised']})")
            results[name] = None
            continue
        if k["raised"] is None:
            if kind == "replay":
                if not torch.equal(k["state"][untouched], state0[untouched]):
                    k["problems"].append("the state of a slot no row uses was written")
            else:
                span = slice(untouched * T, untouched * T + T)
                if not torch.equal(k["state"][span], snap_state0[span]):
                    k["problems"].append("the snapshot slots of a sequence no row uses were written")
                a, r = rel_err(k["state"], ref_state)
                k["worst"]["state_abs"], k["worst"]["state_rel"] = a, r
        w = k["worst"]
        ok = (not k["problems"] and math.isfinite(w["out_rel"]) and w["out_rel"] <= ctx.args.gate_out_tol
              and math.isfinite(w["state_rel"]) and w["state_rel"] <= ctx.args.gate_state_tol)
        results[name] = ok
        rec = dict(check=label, kernel=name, geometry=fam.geom.name, batch=batch, B=B, T=T, accept=mode,
                   steps=step, reference=f"{fam.base_op} with per-draft snapshots on {ref_device.type}", **w,
                   problems=k["problems"][:5], passed=ok)
        ctx.gates.append(rec)
        ctx.log(f"gate {label:<6} {name:<14} {fam.geom.name:<22} batch={batch:<4} B={B:<3} T={T} {mode:<7} "
                f"steps={step:<3} "
                f"out max|err|={w['out_abs']:.3e} rel={w['out_rel']:.2e}  "
                f"state max|err|={w['state_abs']:.3e} rel={w['state_rel']:.2e}  {'ok' if ok else 'FAILED'}"
                + (f"  ({'; '.join(k['problems'][:3])})" if k["problems"] else ""))
        if not ok:
            ctx.note_error(f"gate {label} failed: {name} {fam.geom.name} batch={batch} B={B} T={T} {mode}: "
                           "not timed")
    return results


def time_spec_commit(ctx: Context, batch: int, B: int, T: int, sets_slots: List[torch.Tensor], n_slots: int) -> None:
    """commit at T tokens (once per model step, all layers), timed once per (batch, T)."""
    key = ("spec", batch, T)
    if key in ctx.commit_timed:
        return
    ctx.commit_timed.add(key)
    dev = ctx.device
    cur = Cursors.empty(n_slots, dev)
    reset(torch.arange(n_slots, dtype=torch.int32, device=dev), cur, B, T)
    accepted = torch.full((batch,), T, dtype=torch.int32, device=dev)
    calls = [lambda s=s: commit(s, accepted, cur, B, T, B + T) for s in sets_slots]
    ctx.guarded(f"commit batch={batch} T={T}", lambda: ctx.add_row(
        section="spec", kernel="commit", geometry="-", batch=batch, B=B,
        timing=per_call(ctx.timer.time(calls), len(calls)), nbytes=commit_bytes(batch), n_sets=len(calls),
        note="once per model step, all layers", extra=dict(T=T, accept="-")))


def time_spec_config(ctx: Context, factory: Callable[[torch.device], Family], geom, batch: int, B: int, T: int,
                     mode: str, replay_ok: bool, base_ok: bool) -> None:
    """One (geometry, batch, T, accept mode): the classic step with per-draft snapshots and the
    ReplaySSM spec verify over the same window of steps (same inputs, same accepted lengths), then
    commit at this (batch, T) once."""
    args = ctx.args
    dev = ctx.device
    fam = factory(dev)
    if replay_ok and base_ok and batch > 1 and not args.no_batch_check:
        # Full-batch check against the device's snapshot step (gated itself): half the rows join
        # at step 0, the others at steps 1 and 2.
        delays = [0 if r < batch // 2 else 1 + r % 2 for r in range(batch)]
        passed: Dict[str, Optional[bool]] = {}
        ctx.guarded(f"spec batch check {geom.name} batch={batch} T={T} {mode}", lambda: passed.update(spec_check(
            ctx, factory, B, T, mode, ["replay"], ref_device=dev, label="batch", delays=delays, pad_rows=[])))
        replay_ok = bool(passed.get(f"{fam.spec_kernel}_cycle"))
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    R = B + T
    n_sets = n_cache_sets(ctx, batch * fam.state_row_bytes())
    n_slots = n_sets * batch
    params = fam.make_params()
    perm = torch.randperm(n_slots, generator=torch.Generator().manual_seed(args.seed + batch)).to(torch.int32)
    sets_slots = [perm[s * batch:(s + 1) * batch].to(dev) for s in range(n_sets)]
    set_ids = [s.cpu().numpy() for s in sets_slots]
    inputs = [fam.make_inputs(batch * T) for _ in range(n_sets)]
    out = fam.make_out(batch * T)
    cu = packed_cu_seqlens(batch, T, dev)
    sched = spec_schedule(sets_slots, n_slots, batch, B, T, R, mode, spec_seed(ctx, T, mode, batch, 2), dev)
    K = sched.steps
    order = [(i, s) for i in range(K) for s in range(n_sets)]
    tokens_per_step = float(sched.accepted.mean())
    flush_frac = float(np.mean([sched.flush[i][set_ids[0]].mean() for i in range(K)]))
    extra = dict(T=T, accept=mode, steps=K, warmup_steps=sched.warmup_steps, tokens_per_step=tokens_per_step,
                 flush_rows_per_step=flush_frac)
    note = f"{K} steps per cycle, {tokens_per_step:.2f} accepted tokens per row-step"

    def finish(row):
        row["us_per_token"] = row["us"] / tokens_per_step

    base_row: Dict[str, dict] = {}
    if base_ok:
        snap_state = fam.make_state(n_slots * T)
        write_slots = [snapshot_write_slots(s, T) for s in sets_slots]
        read_slots = [[snapshot_read_slots(sets_slots[s], torch.as_tensor(sched.prev_accepted[i], device=dev), T)
                       for s in range(n_sets)] for i in range(K)]
        calls = [lambda i=i, s=s: fam.state_update_snapshots(inputs[s], params, snap_state, read_slots[i][s], out,
                                                              cu, write_slots[s]) for i, s in order]
        kernel = fam.spec_base_kernel
        ctx.guarded(f"{kernel} {geom.name} batch={batch} T={T} {mode}", lambda: base_row.update(row=ctx.add_row(
            section="spec", kernel=kernel, geometry=geom.name, batch=batch, B=B,
            timing=per_call(ctx.timer.time(calls), len(order)), nbytes=fam.spec_base_bytes(batch, T, T),
            n_sets=n_sets, note=note, extra=extra,
            anchor_us=lambda: seed_spec_anchor_us(kernel, geom.name, batch, B, T, mode))))
        if base_row:
            finish(base_row["row"])
        del snap_state, read_slots, calls
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    base_us = base_row["row"]["us"] if base_row else None

    if replay_ok:
        state = fam.make_state(n_slots)
        rings = fam.make_rings(n_slots, R, params)
        phases = [("cycle", list(range(K)))]
        if args.spec_phases:
            split = spec_phase_steps(sched.flush, set_ids[0])
            if split is None:
                ctx.note_skip(f"{fam.spec_kernel} {geom.name} batch={batch} T={T} {mode}: rows flush at different "
                              f"steps, so the window has no flush / non-flush split (--spec-phases)")
            else:
                phases += [("nonflush", split[0]), ("flush", split[1])]
        for what, steps in phases:
            if what != "cycle" and ctx.budget.exhausted():
                ctx.note_skip(f"{fam.spec_kernel}_{what} {geom.name} batch={batch} T={T} {mode}: budget spent")
                continue
            # Step-major, as the cycle: between two visits of one set every other set is touched.
            step_order = [(i, s) for i in steps for s in range(n_sets)]
            nbytes = sum(fam.spec_bytes(sched.hist[i][set_ids[s]], sched.flush[i][set_ids[s]], T)
                         for i, s in step_order) / len(step_order)
            calls = [lambda i=i, s=s: fam.spec_verify(inputs[s], params, state, rings, cu, sets_slots[s],
                                                      sched.snaps[i], out, T) for i, s in step_order]
            kernel = f"{fam.spec_kernel}_{what}"
            phase_extra = extra if what == "cycle" else dict(
                extra, steps=len(steps), flush_rows_per_step=float(np.mean([sched.flush[i][set_ids[0]].mean()
                                                                             for i in steps])))
            row: Dict[str, dict] = {}
            ctx.guarded(f"{kernel} {geom.name} batch={batch} T={T} {mode}", lambda: row.update(row=ctx.add_row(
                section="spec", kernel=kernel, geometry=geom.name, batch=batch, B=B,
                timing=per_call(ctx.timer.time(calls), len(step_order)), nbytes=nbytes, n_sets=n_sets,
                base_us=base_us, note=note, extra=phase_extra,
                anchor_us=lambda: seed_spec_anchor_us(kernel, geom.name, batch, B, T, mode))))
            if row:
                finish(row["row"])
        time_spec_commit(ctx, batch, B, T, sets_slots, n_slots)


def spec_phase_steps(flushes: Sequence[np.ndarray], ids: np.ndarray) -> Optional[Tuple[List[int], List[int]]]:
    """The window steps in which no row of `ids` flushes and those in which every one does (rows
    in phase, as with every draft accepted), or None when a step has both kinds of row or the
    window lacks either kind of step."""
    nonflush, flush = [], []
    for i, f in enumerate(flushes):
        rows = f[ids].astype(bool)
        if rows.all():
            flush.append(i)
        elif not rows.any():
            nonflush.append(i)
        else:
            return None
    return (nonflush, flush) if nonflush and flush else None


def run_spec_family(ctx: Context, make_family: Callable[[object, torch.device], Family], geometries) -> None:
    args = ctx.args
    dev = ctx.device
    probe = make_family(geometries[0], dev)
    replay_ok = has_kernel(probe.spec_op, dev)
    base_ok = has_kernel(probe.base_op, dev)
    if not replay_ok:
        ctx.note_skip(f"{probe.spec_op} has no {dev.type} kernel: spec replay not timed")
    elif not has_kernel("commit", dev):
        ctx.note_skip(f"commit has no {dev.type} kernel (it advances the cursors): spec replay not timed")
        replay_ok = False
    if not base_ok:
        ctx.note_skip(f"{probe.base_op} has no {dev.type} kernel: spec baseline not timed")
    if not (replay_ok or base_ok):
        return
    B = args.spec_hist_capacity
    Ts = []
    for T in args.spec_tokens:
        if T > B:
            ctx.note_skip(f"spec T={T}: more than B={B} tokens per step is outside the contract (B >= T)")
        else:
            Ts.append(T)

    def t_key(T):  # most informative first: T = 4, then 8, 2, 1
        order = [4, 8, 2, 1]
        return (order.index(T) if T in order else len(order), T)

    configs = [(T, mode) for T in sorted(Ts, key=t_key) for mode in args.accept if T > 1 or mode == "all"]
    cpu = torch.device("cpu")
    batch_order = [256, 1, 64, 512]
    batches = sorted(args.batches, key=lambda b: (batch_order.index(b) if b in batch_order else len(batch_order), b))
    for geom in geometries:
        def factory(d, geom=geom):
            return make_family(geom, d)

        gated: Dict[Tuple[int, str], Tuple[bool, bool]] = {}
        for T, mode in configs:
            kinds = (["replay"] if replay_ok else []) + (["base"] if base_ok and dev.type != "cpu" else [])
            passed: Dict[str, Optional[bool]] = {}
            ctx.guarded(f"spec gate {geom.name} T={T} {mode}", lambda: passed.update(spec_check(
                ctx, factory, B, T, mode, kinds, ref_device=cpu, label="spec")))
            r_ok = replay_ok and bool(passed.get(f"{probe.spec_kernel}_cycle"))
            # On the CPU the baseline is the reference itself (not gated against itself).
            b_ok = base_ok and (dev.type == "cpu" or bool(passed.get(probe.spec_base_kernel)))
            gated[(T, mode)] = (r_ok, b_ok)
        for batch in batches:
            for T, mode in configs:
                r_ok, b_ok = gated[(T, mode)]
                if not (r_ok or b_ok):
                    continue
                if ctx.budget.exhausted():
                    ctx.note_skip(f"spec {geom.name} batch={batch} T={T} {mode}: budget {args.budget_s:.0f}s spent")
                    continue
                ctx.guarded(f"spec {geom.name} batch={batch} T={T} {mode}",
                            lambda: time_spec_config(ctx, factory, geom, batch, B, T, mode, r_ok, b_ok))
                if dev.type == "cuda":
                    torch.cuda.empty_cache()


def section_spec(ctx: Context) -> None:
    st, act = DTYPES[ctx.args.state_dtype], DTYPES[ctx.args.act_dtype]
    m2 = MAMBA2_TINY if ctx.args.tiny else [g for g in MAMBA2_GEOMETRIES if ctx.geometry_selected(g.name)]
    gdn = GDN_TINY if ctx.args.tiny else [g for g in GDN_GEOMETRIES if ctx.geometry_selected(g.name)]
    if m2:
        run_spec_family(ctx, lambda g, d: Mamba2Family(g, st, act, d, ctx.generator_for(d),
                                                       with_z=ctx.args.with_z), m2)
    if gdn:
        run_spec_family(ctx, lambda g, d: GDNFamily(g, st, act, d, ctx.generator_for(d)), gdn)


# ---------------------------------------------------------------------------------------------
# The planner's concurrency table (section plan; no device work)
# ---------------------------------------------------------------------------------------------


def plan_rows(memory_bytes: int, num_layers: int, B: int, Ts: Sequence[int], state_dtype: torch.dtype,
              act_dtype: torch.dtype) -> List[dict]:
    """cache.plan_concurrency for every planner geometry and T: bytes per sequence with ReplaySSM
    (checkpoint + ring of R = B + T entries per layer, + 9 B of cursors) and with per-draft
    snapshots (T states per layer), and the sequences each fits in memory_bytes."""
    from . import cache
    geoms = [("mamba2", "nemotron3-nano-4b", cache.NEMOTRON3_NANO_4B),
             ("mamba2", "nemotron3-super-120b", cache.NEMOTRON3_SUPER),
             ("gdn", "qwen3.5-4b", cache.QWEN35_4B),
             ("gdn", "qwen3.5-122b", cache.QWEN35_122B)]
    rows = []
    for family, name, geometry in geoms:
        for T in Ts:
            plan = cache.plan_concurrency(memory_bytes, family, geometry, num_layers=num_layers, hist_capacity=B,
                                          max_tokens=T, act_dtype=act_dtype, state_dtype=state_dtype)
            d = plan.as_dict()
            d["geometry_name"] = name
            rows.append(d)
    return rows


def format_plan_table(rows: List[dict]) -> str:
    head = (f"{'geometry':<21} {'family':<6} {'T':>2} {'B':>3} {'R':>3} {'ckpt MiB':>8} {'ring MiB':>8} "
            f"{'replay MiB/seq':>14} {'snap MiB/seq':>12} {'replay seqs':>11} {'snap seqs':>9} {'ratio':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        mib = 2.0 ** 20
        lines.append(f"{r['geometry_name']:<21} {r['family']:<6} {r['max_tokens']:>2} {r['hist_capacity']:>3} "
                     f"{r['ring_len']:>3} {r['checkpoint_bytes_per_layer'] / mib:>8.2f} "
                     f"{r['ring_bytes_per_layer'] / mib:>8.2f} {r['replay_bytes_per_seq'] / mib:>14.2f} "
                     f"{r['snapshot_bytes_per_seq'] / mib:>12.2f} {r['replay_max_seqs']:>11} "
                     f"{r['snapshot_max_seqs']:>9} {r['ratio']:>5.2f}x")
    return "\n".join(lines)


def section_plan(ctx: Context) -> None:
    a = ctx.args
    memory = int(a.plan_memory_gib * 2**30)
    ctx.plan = plan_rows(memory, a.plan_layers, a.plan_hist_capacity, a.plan_tokens, DTYPES[a.state_dtype],
                         DTYPES[a.act_dtype])
    print(f"\nConcurrency in fixed memory (replayssm_ext.cache.plan_concurrency): {a.plan_memory_gib:g} GiB of SSM "
          f"cache for {a.plan_layers} SSM layer(s) (--plan-memory-gib, --plan-layers), B={a.plan_hist_capacity}, "
          f"state {a.state_dtype}, ring {a.act_dtype}; per-draft snapshots keep T states per layer, ReplaySSM one "
          f"checkpoint + a ring of R = B + T entries (+ 9 B of cursors per sequence); conv state excluded (both keep "
          f"the same):")
    print(format_plan_table(ctx.plan))


# Sections run in this order; `--sections` picks a subset. A new section is one function here.
# Sections that need no device (run alone, they skip the GPU check and the copy bandwidth).
DEVICE_FREE_SECTIONS = {"plan"}
SECTIONS: Dict[str, Callable[[Context], None]] = {
    "m2": section_m2,
    "gdn": section_gdn,
    "spec": section_spec,
    "plan": section_plan,
}


# ---------------------------------------------------------------------------------------------
# Copy bandwidth
# ---------------------------------------------------------------------------------------------


def measure_copy_bw(ctx: Context, timer: Optional[Timer] = None, where: str = "-") -> float:
    """The copy roofline (GB/s) on `timer`'s SMs; rows labelled `where` in the geometry column."""
    timer = timer or ctx.timer
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
        t = timer.time([fn])
        best = max(best, copy_bytes(n * 4) / t.median_s / 1e9)
        ctx.add_row(section="copy", kernel=name, geometry=where, batch=0, B=None, timing=t,
                    nbytes=copy_bytes(n * 4), n_sets=1,
                    note=f"{n * 4 / 2**30:.2f} GiB buffer, read + write counted")
    return best


# ---------------------------------------------------------------------------------------------
# SM partition (--sms): the timed kernels on part of the device's SMs
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class SmPartition:
    """The timed work confined to `num_sms` of the device's SMs by a CUDA green context.

    What it is for: a kernel that streams the state runs at the rate its SMs keep bytes in flight,
    up to the DRAM's bandwidth. An H200 has the H100's SM count and clock but ~1.4x its bandwidth,
    so each H200 SM must hide ~1.4x the bytes of an H100 SM to reach the same fraction of copy. An
    H100 confined to 96 of its 132 SMs has about an H200's bandwidth per SM (3.04 TB/s / 96 against
    4.26 TB/s / 132), so per-SM limits show on it as on the H200 (against the H200's rows, session
    57: 96 SMs fall as far as the output-only decode, 80-88 as the state-and-output route and the
    GDN verify; bench/results/h100-2026-12-06-s57/sms_sweep.txt). The launchers still read the device's SM count (132, as on the H200), so their grid choices are
    the H200's; waves are counted on the partition's SMs. Its rows' "% copy" divides by the whole
    device's copy bandwidth (the partition's own copy is a row of its own)."""
    num_sms: int
    device_sms: int
    stream: torch.cuda.Stream
    green_context: object  # kept alive: its stream runs on its SMs

    @staticmethod
    def create(device: torch.device, num_sms: int) -> "SmPartition":
        device_sms = torch.cuda.get_device_properties(device).multi_processor_count
        if not 0 < num_sms < device_sms:
            raise ValueError(f"--sms: expected 1..{device_sms - 1} (the device has {device_sms} SMs), got {num_sms}")
        try:
            from torch.cuda.green_contexts import GreenContext
        except ImportError as e:
            raise RuntimeError(f"--sms needs torch.cuda.green_contexts, which torch {torch.__version__} lacks") from e
        green = GreenContext.create(num_sms=num_sms, device_id=device.index)
        if not hasattr(green, "Stream"):
            raise RuntimeError(f"--sms: torch {torch.__version__}'s GreenContext has no Stream(): its kernels can "
                               "only run on the green context's default stream, which CUDA graphs cannot capture")
        return SmPartition(num_sms=num_sms, device_sms=device_sms, stream=green.Stream(), green_context=green)


def check_sm_partition(ctx: Context, part: SmPartition, device_timer: Timer) -> dict:
    """A bf16 matrix product timed on the whole device and on the partition: a compute-bound kernel
    slows down on fewer SMs. Raises if it slows down by less than half of device_sms / num_sms - 1
    (the green context then does not confine the captured graphs), so no run reports whole-device
    rows as partition rows. The ratio is of the fastest replays: on all SMs the product runs at a
    power-limited clock that varies from run to run (H100, 96 of 132 SMs: medians 1.18-1.35 against
    the SM ratio 1.375, one run failing this check on them in session 58; fastest replays 1.28-1.35,
    80 SMs 1.46-1.57 against 1.65). The partitions themselves have exactly the SMs asked for (a
    Triton probe of %smid, session 57's bench/results/h100-2026-12-06-s57/smid_probe.py: 64, 80, 88,
    96 and 112)."""
    n = 8192
    gen = ctx.generator_for(ctx.device)
    a = torch.randn(n, n, device=ctx.device, generator=gen).to(torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, generator=gen).to(torch.bfloat16)
    c = torch.empty_like(a)
    fn = lambda: torch.mm(a, b, out=c)
    t_dev = device_timer.time([fn])
    t_part = ctx.timer.time([fn])
    for where, t in ((f"{part.device_sms} SMs", t_dev), (f"{part.num_sms} SMs", t_part)):
        ctx.add_row(section="copy", kernel="bf16_matmul", geometry=where, batch=0, B=None, timing=t, nbytes=None,
                    n_sets=1, note=f"{n}x{n}x{n}: checks that the SM partition applies")
    ratio = t_part.min_s / t_dev.min_s
    expected = part.device_sms / part.num_sms
    ctx.log(f"SM partition: matmul on {part.num_sms} of {part.device_sms} SMs takes {ratio:.3f}x the whole "
            f"device's time, fastest replays (SM ratio {expected:.3f})")
    if ratio < 1.0 + 0.5 * (expected - 1.0):
        raise RuntimeError(f"--sms {part.num_sms}: the matmul on the partition took {ratio:.3f}x the whole device's "
                           f"time (fastest replays), expected about {expected:.3f}x: the green context does not "
                           "confine the graphs")
    return dict(num_sms=part.num_sms, device_sms=part.device_sms, matmul_time_ratio=ratio,
                sm_ratio=expected)


def start_sm_partition(ctx: Context, part: SmPartition, device_timer: Timer) -> None:
    """The yardstick is the whole device's copy; the partition's own copy and the check that the
    partition applies are rows beside it."""
    ctx.copy_gbps = measure_copy_bw(ctx, device_timer, f"{part.device_sms} SMs")
    ctx.sm_partition = check_sm_partition(ctx, part, device_timer)
    ctx.sm_partition["copy_gbps"] = measure_copy_bw(ctx, ctx.timer, f"{part.num_sms} SMs")
    ctx.log(f"copy: {ctx.copy_gbps:.0f} GB/s on the whole device, {ctx.sm_partition['copy_gbps']:.0f} GB/s on "
            f"{part.num_sms} SMs; every kernel below runs on the {part.num_sms}")


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
        accept = ACCEPT_MODES.index(r["accept"]) if r.get("accept") in ACCEPT_MODES else -1
        return (sec, r["geometry"], r["batch"], r["B"] or 0, r.get("T") or 0, accept,
                0 if r["kernel"].endswith("_base") else 1, variant, phase)
    return sorted(rows, key=key)


def spec_rows(rows: List[dict]) -> List[dict]:
    return [r for r in rows if r["section"] == "spec"]


def decode_rows(rows: List[dict]) -> List[dict]:
    return [r for r in rows if r["section"] != "spec"]


def format_spec_table(rows: List[dict]) -> str:
    cols = [("kernel", "kernel", "<16", None), ("geometry", "geometry", "<21", None), ("batch", "batch", ">5", None),
            ("B", "B", ">3", None), ("T", "T", ">2", None), ("accept", "accept", "<7", None),
            ("steps", "steps", ">5", None), ("tok/step", "tokens_per_step", ">8", ".2f"),
            ("us/step", "us", ">10", ".2f"), ("us/tok", "us_per_token", ">9", ".2f"),
            ("x base", "speedup_vs_base", ">7", ".2f"), ("seed us", "seed_us", ">8", ".1f"),
            ("x seed", "speedup_vs_seed", ">7", ".2f"), ("GB/s", "gbps", ">8", ".0f"),
            ("% copy", "copy_frac", ">7", ".1%")]
    lines = ["  ".join(format(h, a) for h, _, a, _ in cols)]
    lines.append("-" * len(lines[0]))
    for r in rows:
        cells = []
        for _, key, align, spec in cols:
            v = r.get(key)
            s = _fmt(v, spec) if spec else ("-" if v is None else str(v))
            cells.append(format(s, align))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def short_rows(rows: List[dict]) -> List[dict]:
    return [r for r in sort_rows(decode_rows(rows))
            if r["kernel"].startswith("d2d_copy") or r["kernel"].endswith("_base") or "_cycle" in r["kernel"]
            or (r["kernel"].endswith("flush") and r["batch"] == 256 and r["B"] == 16)]


def write_plot(ctx: Context, path: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot skipped"
    cyc = [r for r in ctx.rows if r["section"] != "spec" and "_cycle" in r["kernel"] and r["speedup_vs_base"]]
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


def write_spec_plot(ctx: Context, path: str) -> Optional[str]:
    """Speedup of every spec replay row over the per-draft snapshot step vs batch: one panel per
    geometry, one line per (T, accept mode); the seed's all-accepted speedup dashed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: spec plot skipped"
    cyc = [r for r in spec_rows(ctx.rows) if r["kernel"].endswith("_spec_cycle") and r["speedup_vs_base"]]
    geoms = sorted({r["geometry"] for r in cyc})
    if not geoms:
        return "no spec rows with a baseline: spec plot skipped"
    ncols = min(2, len(geoms))
    nrows = math.ceil(len(geoms) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(geoms):]:
        ax.set_visible(False)
    for ax, geom in zip(axes.flat, geoms):
        for kernel, T, mode in sorted({(r["kernel"], r["T"], r["accept"]) for r in cyc if r["geometry"] == geom}):
            pts = sorted((r["batch"], r["speedup_vs_base"]) for r in cyc if r["geometry"] == geom
                         and r["kernel"] == kernel and r["T"] == T and r["accept"] == mode)
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"T={T} {mode}")
            seed = SEED_SPEC_ANCHOR_US.get((kernel, geom))
            seed_base = SEED_SPEC_ANCHOR_US.get((kernel.replace("_cycle", "_base"), geom))
            if ctx.anchors_apply() and mode == "all" and seed and seed_base:
                sp = sorted((b, seed_base[(b, t)] / us) for (b, t), us in seed.items()
                            if t == T and (b, t) in seed_base)
                ax.plot([p[0] for p in sp], [p[1] for p in sp], linestyle="--", alpha=0.6, color=line.get_color(),
                        label=f"seed T={T} all")
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch")
        ax.set_ylabel("speedup vs per-draft snapshot step")
        ax.set_title(f"{geom} (spec verify, B={ctx.args.spec_hist_capacity})")
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
                l2_bytes=ctx.l2_bytes, copy_gbps=ctx.copy_gbps, sm_partition=ctx.sm_partition,
                args=vars(ctx.args).copy(),
                elapsed_s=ctx.budget.elapsed(),
                anchors=dict(source="/work/shared/anchors/h200-seed-triton.json (seed Triton kernels, H200)",
                             copy_gbps=SEED_ANCHOR_COPY_GBPS, applied=ctx.anchors_apply()),
                bytes_model={name: fn.__doc__ for name, fn in [
                    ("mamba2_state_update", mamba2_state_update_bytes), ("mamba2_decode", mamba2_decode_bytes),
                    ("mamba2_ring_entry", mamba2_ring_entry_bytes), ("mamba2_token_io", mamba2_token_io_bytes),
                    ("gdn_state_update", gdn_state_update_bytes), ("gdn_decode", gdn_decode_bytes),
                    ("gdn_ring_entry", gdn_ring_entry_bytes), ("gdn_token_io", gdn_token_io_bytes),
                    ("commit", commit_bytes), ("copy", copy_bytes),
                    ("mamba2_spec_verify", mamba2_spec_verify_bytes),
                    ("mamba2_spec_snapshot_baseline", mamba2_spec_snapshot_bytes),
                    ("gdn_spec_verify", gdn_spec_verify_bytes), ("gdn_spec_snapshot_baseline", gdn_spec_snapshot_bytes),
                    ("cu_seqlens", cu_seqlens_bytes)]})
    if "spec" in ctx.args.sections:
        meta["spec"] = dict(
            hist_capacity=ctx.args.spec_hist_capacity,
            accept_distributions={m: {T: accept_distribution(m, T).tolist() for T in ctx.args.spec_tokens}
                                  for m in ctx.args.accept},
            mean25_draft_accept=MEAN25_DRAFT_ACCEPT,
            snapshot_layout="sequence in ReplaySSM slot s owns snapshot slots s*T..s*T+T-1; a step reads "
                            "s*T + a_prev - 1 and writes the state after token i to s*T + i (vLLM's scheme)",
            anchors=dict(SEED_SPEC_ANCHOR_US=f"seed Triton, B={SEED_SPEC_HIST_CAPACITY}, all accepted, replay "
                                             "includes its commit"))
    if "plan" in ctx.args.sections:
        meta["plan"] = dict(memory_gib=ctx.args.plan_memory_gib, layers=ctx.args.plan_layers,
                            hist_capacity=ctx.args.plan_hist_capacity, tokens=ctx.args.plan_tokens)
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
        description="Classic decode step vs ReplaySSM decode, and per-draft-snapshot spec verify vs ReplaySSM spec "
                    "verify (Mamba-2, GDN): CUDA-graph timing of whole flush cycles, analytic bytes, fraction of "
                    "copy bandwidth; the planner's concurrency table. See bench/README.md.")
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
    p.add_argument("--sms", type=int, default=None,
                   help="CUDA: run the timed kernels on this many of the device's SMs (a green context; 96 of an "
                        "H100's 132 give about an H200's bandwidth per SM); %% copy stays of the whole device")
    p.add_argument("--copy-gb", type=float, default=None, help="copy-bandwidth buffer in GiB (default 1; --tiny 0.03)")
    p.add_argument("--no-batch-check", action="store_true",
                   help="skip the full-batch check against the device classic step (the small gate still runs)")
    p.add_argument("--gate-out-tol", type=float, default=None,
                   help="gate bound on ||out - ref|| / ||ref|| per step (default 3e-2 when the state or act dtype is "
                        "bf16/fp16, 1e-3 when both are fp32)")
    p.add_argument("--gate-state-tol", type=float, default=None,
                   help="gate bound on the flushed checkpoint's relative error (default 1e-2 for a bf16/fp16 state or "
                        "act, 1e-3 otherwise)")
    p.add_argument("--spec-tokens", type=_int_list, default=None,
                   help="spec section: tokens per verify step T (1 + drafts), comma list (default 1,2,4,8; --tiny 1,2)")
    p.add_argument("--accept", type=_str_list, default=list(ACCEPT_MODES),
                   help="spec section: accepted-length modes, from all (T accepted every step) and mean2.5 (truncated "
                        "geometric, mean 2.5 of 4 at T=4); default both (T=1 runs all only)")
    p.add_argument("--spec-phases", action="store_true",
                   help="spec section: where rows are in phase (every draft accepted), also time the window's "
                        "non-flush steps and its flush step on their own (rows <kernel>_nonflush, <kernel>_flush: "
                        "us per step, steps = how many of the window's steps each covers)")
    p.add_argument("--spec-hist-capacity", type=int, default=None,
                   help="spec section: history capacity B (default 16; --tiny 4)")
    p.add_argument("--plan-memory-gib", type=float, default=40.0,
                   help="plan section: SSM cache memory budget in GiB (default 40)")
    p.add_argument("--plan-layers", type=int, default=1,
                   help="plan section: SSM layers the budget holds (default 1: the table is per layer)")
    p.add_argument("--plan-tokens", type=_int_list, default=[2, 4, 8],
                   help="plan section: T values (default 2,4,8)")
    p.add_argument("--plan-hist-capacity", type=int, default=16, help="plan section: B (default 16)")
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
    bad_accept = [m for m in args.accept if m not in ACCEPT_MODES]
    if bad_accept or not args.accept:
        p.error(f"--accept: unknown {bad_accept}, expected a subset of {list(ACCEPT_MODES)}")
    if args.plan_layers < 1 or args.plan_memory_gib <= 0:
        p.error(f"--plan-layers must be >= 1 and --plan-memory-gib > 0, got {args.plan_layers} and "
                f"{args.plan_memory_gib}")
    bad_plan_T = [T for T in args.plan_tokens if T > args.plan_hist_capacity]
    if bad_plan_T:
        p.error(f"--plan-tokens: T must be <= --plan-hist-capacity ({args.plan_hist_capacity}), got {bad_plan_T}")
    if args.tiny:
        args.batches = args.batches or [1, 3]
        args.hist_capacities = args.hist_capacities or [4]
        args.spec_tokens = args.spec_tokens or [1, 2]
        args.spec_hist_capacity = args.spec_hist_capacity or 4
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
    args.spec_tokens = args.spec_tokens or [1, 2, 4, 8]
    args.spec_hist_capacity = args.spec_hist_capacity or 16
    if args.spec_hist_capacity < 1:
        p.error(f"--spec-hist-capacity must be >= 1, got {args.spec_hist_capacity}")
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
    device_free = set(args.sections) <= DEVICE_FREE_SECTIONS
    if device_free:  # only the planner's table: no device, no copy bandwidth
        args.device = "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("replayssm benchmark: --device cuda but torch sees no CUDA device (use --device cpu --tiny for the "
              "smoke test)", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    torch.manual_seed(args.seed)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size if dev.type == "cuda" else 0
    if args.sms is not None and (dev.type != "cuda" or device_free):
        print("replayssm benchmark: --sms needs --device cuda and a section that times kernels", file=sys.stderr)
        return 2
    try:
        partition = SmPartition.create(dev, args.sms) if args.sms is not None else None
    except (ValueError, RuntimeError) as e:
        print(f"replayssm benchmark: {e}", file=sys.stderr)
        return 2

    def make_timer(stream):
        return Timer(dev, use_graphs=not args.no_graphs, target_s=args.target_ms * 1e-3, min_reps=args.min_reps,
                     max_reps=args.max_reps, min_calls=args.min_calls, stream=stream)

    timer = make_timer(partition.stream if partition else None)
    ctx = Context(args=args, device=dev, timer=timer, budget=Budget(args.budget_s), l2_bytes=l2)
    print(f"replayssm benchmark on {metadata(ctx)['device']} (torch {torch.__version__}, L2 {l2 / 2**20:.0f} MiB): "
          f"sections={','.join(args.sections)} batches={args.batches} B={args.hist_capacities} "
          f"state={args.state_dtype} act={args.act_dtype} z={'on' if args.with_z else 'off'} "
          f"{'stagger ' if args.stagger else ''}{'commit-in-cycle ' if args.commit_in_cycle else ''}"
          f"{f'sms={args.sms} ' if partition else ''}budget={args.budget_s:.0f}s")
    if dev.type == "cpu" and not device_free:
        print("  (CPU: the ops are the Python reference; times are wall clock and say nothing about GPU speed)")

    try:
        sections = args.sections
        if partition is not None:
            if not ctx.guarded("SM partition", lambda: start_sm_partition(ctx, partition, make_timer(None))):
                sections = []  # rows on the whole device would pass for partition rows
        elif not device_free and not ctx.guarded("d2d copy", lambda: setattr(ctx, "copy_gbps", measure_copy_bw(ctx))):
            ctx.note_error("no copy bandwidth: the % copy column stays empty")
        for name in sections:
            ctx.log(f"section {name}")
            SECTIONS[name](ctx)
    except FatalDeviceError as e:
        ctx.note_error(f"run stopped: {e}")

    rows = sort_rows(ctx.rows)
    ran_decode = any(r["section"] in ("m2", "gdn") for r in rows)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump(dict(meta=metadata(ctx), rows=rows, gates=ctx.gates, skipped=ctx.skipped, errors=ctx.errors,
                           plan=ctx.plan), f, indent=1, default=str)
        with open(os.path.join(args.out, "table.txt"), "w") as f:
            f.write(format_table(decode_rows(rows)) + "\n")
            if spec_rows(rows):
                f.write("\n" + format_spec_table(spec_rows(rows)) + "\n")
            if ctx.plan:
                f.write("\n" + format_plan_table(ctx.plan) + "\n")
        notes = [write_plot(ctx, os.path.join(args.out, "speedup.png"))] if ran_decode else []
        if spec_rows(rows):
            notes.append(write_spec_plot(ctx, os.path.join(args.out, "spec_speedup.png")))
        print(f"\nwrote {args.out}/bench.json, table.txt; plots: "
              + ("; ".join(n for n in notes if n) or "written"))
    else:
        print("\n(no --out: JSON and plot not written)")

    if decode_rows(rows):
        print("\nAll rows (us per layer-step; x base = classic step time / this time; x seed = the seed's anchor time "
              "/ this time; GB/s from the analytic bytes; % copy = of the d2d copy bandwidth measured above):")
        print(format_table(decode_rows(rows)))
    if spec_rows(rows):
        print("\nSpeculative verify (us per layer-step over whole cycles; tok/step = accepted tokens per row-step; "
              "us/tok = us per step / tok/step; x base = the per-draft snapshot step's time / this time, same "
              "accepted lengths and inputs):")
        print(format_spec_table(spec_rows(rows)))
    if ctx.plan and not device_free:  # a plan-only run printed it just above
        print("\nPlanner concurrency table (budget and formulas: see the plan section above):")
        print(format_plan_table(ctx.plan))
    gates_failed = [g for g in ctx.gates if not g["passed"]]
    print(f"\ngates: {len(ctx.gates) - len(gates_failed)}/{len(ctx.gates)} passed; skipped: {len(ctx.skipped)}; "
          f"errors: {len(ctx.errors)}; elapsed {ctx.budget.elapsed():.1f}s")
    for e in ctx.errors:
        print(f"  ERROR: {e}")
    if ran_decode:
        print("\nSummary (baselines, cycles, flush steps at batch 256 B=16):")
        print(format_table(short_rows(rows)))
    if spec_rows(rows):
        print("\nSpec summary (batch 1 and 256):")
        print(format_spec_table([r for r in spec_rows(rows) if r["batch"] in (1, 256)]))
    return 1 if ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
