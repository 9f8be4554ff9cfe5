"""Test-side models of the ReplaySSM contract (docs/contract.md), written independently of
replayssm_ext.reference so that a bug shared by the CPU ops and the reference cannot hide:

- the sequential recurrences of Mamba-2 and GDN, token by token, at two precisions: the fp64
  ground truth, and a "same-precision PyTorch implementation" (inputs in the act dtype, arithmetic
  in fp32, the state rounded to its storage dtype after every token, outputs rounded to act, and
  for the replay ops GDN's u and k̂ rounded to act where the contract stores them in the ring),
  which is what the flash-attention tolerance rule measures a kernel against;
- the flash-attention tolerance rule itself (FACheck: asserted once per run and category);
- a step-by-step driver (Sim) that runs a batch of sequences through the replay ops (decode or
  spec verify + commit), with padding rows, staggered starts, replacements and folds on demand,
  and checks after every call, exactly: padding outputs untouched (with `strided_out`, out is a
  view into a wider buffer, none of whose other elements may change), the checkpoint unchanged
  on non-flush rows, the new ring entries at their physical slots (x / B bit copies of the
  inputs), every other byte of every slot unchanged, the cursors (vs
  replayssm_ext.cursor_rules); and, to the tolerance rule over the run: outputs, the checkpoint
  after flushes and folds, ring values.
"""

import dataclasses
import os
import math
from typing import Dict, List, Optional, Union

import torch

from replayssm_ext import cursor_rules

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# (state, act) precision pairs the sweeps cover, as in the seed's tests (s<state>_a<act>).
PRECISIONS = [("fp32", "fp32"), ("fp32", "bf16"), ("bf16", "bf16"), ("fp32", "fp16"), ("fp16", "fp16")]


def softplus20(v: torch.Tensor) -> torch.Tensor:
    return torch.where(v > 20, v, torch.log1p(torch.exp(torch.clamp(v, max=20))))


# --------------------------------------------------------------------------------------------
# The flash-attention tolerance rule
# --------------------------------------------------------------------------------------------

def rounding_floor(truth: torch.Tensor, dtype: torch.dtype) -> float:
    """FA's absolute floor: twice the rounding error of adding and removing 0.3 in `dtype`, at the
    magnitude of the values compared."""
    t = truth.to(dtype)
    return 2.0 * ((t + 0.3) - 0.3 - t).abs().max().double().item()


class FACheck:
    """The flash-attention rule over one test run. FA applies the rule to one output tensor per
    test; a run here produces its outputs over many calls, so each category (outputs, checkpoint,
    each ring) accumulates max|out - truth|, max|out_pt - truth| and the floor over every call of
    the run, and `check` asserts the rule once per category, naming the call with the worst error.
    (Applied to each call alone, the rule at fp32 compares the rounding noise of two formulations
    over a few hundred elements and fails on that noise a few times in a thousand calls.)"""

    def __init__(self):
        self.cats: Dict[str, dict] = {}

    def add(self, cat: str, where: str, out, truth, pt, dtype):
        if out.numel() == 0:
            return
        truth = truth.double().cpu()
        err = (out.double().cpu() - truth).abs().max().item()
        err_pt = (pt.double().cpu() - truth).abs().max().item()
        c = self.cats.setdefault(cat, {"err": 0.0, "where": None, "err_pt": 0.0, "floor": 0.0, "calls": 0})
        if not math.isnan(c["err"]) and (math.isnan(err) or err > c["err"]):
            c["err"], c["where"] = err, where
        c["err_pt"] = max(c["err_pt"], err_pt)
        c["floor"] = max(c["floor"], rounding_floor(truth, dtype))
        c["calls"] += 1

    def ratios(self) -> Dict[str, float]:
        def ratio(c):
            bound = 2 * c["err_pt"] + c["floor"]
            return c["err"] / bound if bound > 0 else (0.0 if c["err"] == 0 else math.inf)
        return {cat: ratio(c) for cat, c in self.cats.items()}

    def check(self):
        bad = []
        for cat, c in self.cats.items():
            bound = 2 * c["err_pt"] + c["floor"]
            if not c["err"] <= bound:
                bad.append(f"{cat}: max|out - truth| = {c['err']:.3e} (worst at {c['where']}) exceeds "
                           f"2 * max|out_pt - truth| + floor = 2 * {c['err_pt']:.3e} + {c['floor']:.3e} "
                           f"= {bound:.3e} over {c['calls']} calls")
        assert not bad, "flash-attention rule failed:\n" + "\n".join(bad)


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN == NaN with the same payload)."""
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


# --------------------------------------------------------------------------------------------
# Families: inputs, the per-token recurrence, cache tensors, op calls
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Mamba2Geo:
    H: int
    P: int
    N: int
    G: int


@dataclasses.dataclass
class GDNGeo:
    H: int
    HV: int
    K: int
    V: int


class Mamba2:
    """Mamba-2: S (H, P, N); ring x (H, R, P), B (G, R, N), dt (H, R)."""

    name = "mamba2"
    ring_names = ("ring_x", "ring_B", "ring_dt")

    def __init__(self, geo: Mamba2Geo, *, use_D=True, use_z=True, use_dt_bias=True, dt_softplus=True):
        self.geo = geo
        self.use_D, self.use_z, self.use_dt_bias, self.dt_softplus = use_D, use_z, use_dt_bias, dt_softplus

    def state_shape(self):
        g = self.geo
        return (g.H, g.P, g.N)

    def ring_shapes(self, R):
        g = self.geo
        return {"ring_x": (g.H, R, g.P), "ring_B": (g.G, R, g.N), "ring_dt": (g.H, R)}

    def ring_dtypes(self, act):
        return {"ring_x": act, "ring_B": act, "ring_dt": torch.float32}

    def out_shape(self):
        return (self.geo.H, self.geo.P)

    def make_layer(self, gen):
        g = self.geo
        p = {"A": -(torch.rand(g.H, generator=gen) + 1.0)}
        p["D"] = torch.randn(g.H, generator=gen) if self.use_D else None
        p["dt_bias"] = (torch.rand(g.H, generator=gen) - 4.0) if self.use_dt_bias else None
        return p

    def make_tokens(self, gen, shape, act):
        """Inputs for `shape` = (rows, tokens) positions, in the act dtype."""
        g = self.geo
        t = {
            "x": torch.randn(*shape, g.H, g.P, generator=gen),
            "B": torch.randn(*shape, g.G, g.N, generator=gen),
            "C": torch.randn(*shape, g.G, g.N, generator=gen),
        }
        if self.dt_softplus:
            t["dt"] = torch.randn(*shape, g.H, generator=gen)
        else:  # a positive step without softplus (bias, when used, is about -3.5: keep the sum > 0)
            t["dt"] = torch.rand(*shape, g.H, generator=gen) * 0.2 + 0.01 + (4.0 if self.use_dt_bias else 0.0)
        if self.use_z:
            t["z"] = torch.randn(*shape, g.H, g.P, generator=gen)
        return {k: v.to(act) for k, v in t.items()}

    def random_state(self, gen, lead, dtype):
        return (torch.randn(*lead, *self.state_shape(), generator=gen) * 0.5).to(dtype)

    def token(self, S, tok, layer, cd, ring_act=None):
        """One recurrence step for all rows, in compute dtype `cd`. S (rows, H, P, N).
        Returns (y, S_new, ring entries of this token as {ring name: (rows, heads, inner...)}).
        (`ring_act` is a no-op here: x and B are act inputs already, dt is stored in fp32.)"""
        g = self.geo
        rep = g.H // g.G
        delta = tok["dt"].to(cd)
        if layer["dt_bias"] is not None:
            delta = delta + layer["dt_bias"].to(cd)
        if self.dt_softplus:
            delta = softplus20(delta)
        x = tok["x"].to(cd)
        Bh = tok["B"].to(cd).repeat_interleave(rep, dim=1)
        Ch = tok["C"].to(cd).repeat_interleave(rep, dim=1)
        dA = torch.exp(layer["A"].to(cd) * delta)
        S = S * dA[..., None, None] + (delta[..., None] * x)[..., None] * Bh[:, :, None, :]
        y = (S * Ch[:, :, None, :]).sum(-1)
        if layer["D"] is not None:
            y = y + layer["D"].to(cd)[:, None] * x
        if "z" in tok:
            z = tok["z"].to(cd)
            y = y * z * torch.sigmoid(z)
        return y, S, {"ring_x": tok["x"], "ring_B": tok["B"], "ring_dt": delta}

    # Which ring entries must be bit copies of the inputs (the rest are computed values).
    exact_rings = ("ring_x", "ring_B")

    def op_inputs(self, tok, layer):
        return (tok["x"], tok["dt"], layer["A"], tok["B"], tok["C"], layer["D"], tok.get("z"),
                layer["dt_bias"], self.dt_softplus)

    def decode(self, tok, layer, slots, cur, cache, out, null_slot, route="output_only"):
        torch.ops.replayssm.mamba2_decode(*self.op_inputs(tok, layer), slots, cur["hist"], cur["start"],
                                          cur["flush"], cache["state"], cache["ring_x"], cache["ring_B"],
                                          cache["ring_dt"], out, route, null_slot)

    def spec_verify(self, tok, layer, cu, slots, cur, cache, out, T, null_slot):
        torch.ops.replayssm.mamba2_spec_verify(*self.op_inputs(tok, layer), cu, slots, cur["hist"], cur["start"],
                                               cur["flush"], cache["state"], cache["ring_x"], cache["ring_B"],
                                               cache["ring_dt"], out, T, null_slot)

    def flush(self, layer, slots, cur, cache, null_slot):
        torch.ops.replayssm.mamba2_flush(layer["A"], slots, cur["hist"], cur["start"], cache["state"],
                                         cache["ring_x"], cache["ring_B"], cache["ring_dt"], null_slot)

    def state_update(self, tok, layer, slots, state, out, cu=None, snap=None, null_slot=None):
        torch.ops.replayssm.mamba2_state_update(*self.op_inputs(tok, layer), slots, state, out, cu, snap, null_slot)


class GDN:
    """Gated DeltaNet: S (HV, V, K); ring u (HV, R, V), k (H, R, K), g (HV, R)."""

    name = "gdn"
    ring_names = ("ring_u", "ring_k", "ring_g")
    exact_rings = ()

    def __init__(self, geo: GDNGeo, *, use_dt_bias=True, qk_l2norm=True, scale=None):
        self.geo = geo
        self.use_dt_bias, self.qk_l2norm = use_dt_bias, qk_l2norm
        self.scale = geo.K ** -0.5 if scale is None else scale

    def state_shape(self):
        g = self.geo
        return (g.HV, g.V, g.K)

    def ring_shapes(self, R):
        g = self.geo
        return {"ring_u": (g.HV, R, g.V), "ring_k": (g.H, R, g.K), "ring_g": (g.HV, R)}

    def ring_dtypes(self, act):
        return {"ring_u": act, "ring_k": act, "ring_g": torch.float32}

    def out_shape(self):
        return (self.geo.HV, self.geo.V)

    def make_layer(self, gen):
        g = self.geo
        return {"A_log": torch.log(torch.rand(g.HV, generator=gen) * 1.5 + 0.5),
                "dt_bias": (torch.rand(g.HV, generator=gen) - 0.5) if self.use_dt_bias else None}

    def make_tokens(self, gen, shape, act):
        g = self.geo
        k = torch.randn(*shape, g.H, g.K, generator=gen)
        q = torch.randn(*shape, g.H, g.K, generator=gen)
        if not self.qk_l2norm:  # keep the delta rule contractive: |k| about 1
            k = k / math.sqrt(g.K)
        t = {"q": q, "k": k, "v": torch.randn(*shape, g.HV, g.V, generator=gen),
             "a": torch.randn(*shape, g.HV, generator=gen), "b": torch.randn(*shape, g.HV, generator=gen)}
        return {n: v.to(act) for n, v in t.items()}

    def random_state(self, gen, lead, dtype):
        return (torch.randn(*lead, *self.state_shape(), generator=gen) * 0.3).to(dtype)

    def token(self, S, tok, layer, cd, ring_act=None):
        """As Mamba2.token, S (rows, HV, V, K). With `ring_act` (the pt model), the state update
        consumes u and k̂ rounded to that dtype: the contract stores them in the act dtype in the
        ring, so every later state (fold, replay) is built from the rounded values."""
        g = self.geo
        rep = g.HV // g.H
        a = tok["a"].to(cd)
        if layer["dt_bias"] is not None:
            a = a + layer["dt_bias"].to(cd)
        gl = -torch.exp(layer["A_log"].to(cd)) * softplus20(a)  # (rows, HV)
        beta = torch.sigmoid(tok["b"].to(cd))
        q, k = tok["q"].to(cd), tok["k"].to(cd)
        if self.qk_l2norm:
            q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
            k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        q = q * self.scale
        kh = k.repeat_interleave(rep, dim=1)
        qh = q.repeat_interleave(rep, dim=1)
        decay = torch.exp(gl)[..., None, None]
        Sd = S * decay
        u = beta[..., None] * (tok["v"].to(cd) - (Sd * kh[:, :, None, :]).sum(-1))
        if ring_act is not None:
            u_s, k_s = u.to(ring_act).to(cd), kh.to(ring_act).to(cd)
        else:
            u_s, k_s = u, kh
        S = Sd + u_s[..., :, None] * k_s[:, :, None, :]
        y = (S * qh[:, :, None, :]).sum(-1)
        return y, S, {"ring_u": u, "ring_k": k, "ring_g": gl}

    def op_inputs(self, tok, layer):
        return (tok["q"], tok["k"], tok["v"], tok["a"], tok["b"], layer["A_log"], layer["dt_bias"],
                self.scale, self.qk_l2norm)

    def decode(self, tok, layer, slots, cur, cache, out, null_slot, route=None):
        assert route is None
        torch.ops.replayssm.gdn_decode(*self.op_inputs(tok, layer), slots, cur["hist"], cur["start"], cur["flush"],
                                       cache["state"], cache["ring_u"], cache["ring_k"], cache["ring_g"], out,
                                       null_slot)

    def spec_verify(self, tok, layer, cu, slots, cur, cache, out, T, null_slot):
        torch.ops.replayssm.gdn_spec_verify(*self.op_inputs(tok, layer), cu, slots, cur["hist"], cur["start"],
                                            cur["flush"], cache["state"], cache["ring_u"], cache["ring_k"],
                                            cache["ring_g"], out, T, null_slot)

    def flush(self, layer, slots, cur, cache, null_slot):
        torch.ops.replayssm.gdn_flush(slots, cur["hist"], cur["start"], cache["state"], cache["ring_u"],
                                      cache["ring_k"], cache["ring_g"], null_slot)

    def state_update(self, tok, layer, slots, state, out, cu=None, snap=None, null_slot=None):
        torch.ops.replayssm.gdn_state_update(*self.op_inputs(tok, layer), slots, state, out, cu, snap, null_slot)


def to_device(d, device):
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


# --------------------------------------------------------------------------------------------
# Precision model: the sequential recurrence at fp64 (truth) and at the kernel's precisions (pt)
# --------------------------------------------------------------------------------------------

class Recurrence:
    """Per-row sequential recurrence state at one precision.

    truth: fp64 arithmetic, state kept in fp64.
    pt:    fp32 arithmetic, state rounded to `state_dtype` after every token, outputs rounded to act,
           and values the contract stores in the act dtype (GDN's u and k̂ in the ring) rounded to
           act where the recurrence consumes them: the same storage precisions as the ops.
    """

    def __init__(self, fam, layer, state0: torch.Tensor, *, truth: bool, state_dtype, act, ring_storage=True):
        self.fam, self.layer, self.truth = fam, layer, truth
        # The baseline ops (*_state_update) keep no ring: nothing is stored in act but the outputs.
        self.ring_act = act if (ring_storage and not truth) else None
        self.cd = torch.float64 if truth else torch.float32
        self.state_dtype, self.act = state_dtype, act
        self.S = self._store(state0.detach().cpu().to(self.cd))

    def _store(self, S):
        return S if self.truth else S.to(self.state_dtype).to(self.cd)

    def run(self, toks, count, rows=None):
        """Advance the rows `rows` (all when None) through `count` tokens of `toks` (each
        (len(rows), >= count, ...)) from their current states without committing. Returns
        (ys (rows, count, ...), states after each token (count, rows, ...), ring entries
        {name: (rows, count, ...)})."""
        S = self.S if rows is None else self.S[rows]
        ys, states, entries = [], [], {}
        for i in range(count):
            tok = {k: v[:, i] for k, v in toks.items()}
            y, S_new, ent = self.fam.token(S, tok, self.layer, self.cd, self.ring_act)
            if not self.truth:
                y = y.to(self.act)
            S = self._store(S_new)
            ys.append(y)
            states.append(S)
            for k, v in ent.items():
                entries.setdefault(k, []).append(v)
        return (torch.stack(ys, 1), torch.stack(states, 0),
                {k: torch.stack(v, 1) for k, v in entries.items()})


# --------------------------------------------------------------------------------------------
# Caches and cursors
# --------------------------------------------------------------------------------------------

def alloc_out(rows, inner_shape, dtype, device, *, strided):
    """A NaN-filled output of shape (rows, *inner_shape), inner dims contiguous. `strided`: a view
    one element into a wider buffer with a row stride of inner + 1 elements (odd; for 2-byte dtypes
    the base and every other row start off the 4-byte grid), as a caller writing into a slice of a
    packed buffer may pass. Returns (buffer, out, gaps): gaps masks the buffer elements outside out,
    which no op may write."""
    inner = math.prod(inner_shape)
    offset, row_stride = (1, inner + 1) if strided else (0, inner)
    numel = offset + rows * row_stride + offset

    def view(t):
        return t[offset:offset + rows * row_stride].view(rows, row_stride)[:, :inner].view(rows, *inner_shape)

    buf = torch.full((numel,), float("nan"), dtype=dtype, device=device)
    gaps = torch.ones(numel, dtype=torch.bool)
    view(gaps).fill_(False)
    return buf, view(buf), gaps


def alloc_per_slot(num_slots, inner_shape, dtype, device, gen, *, paged):
    """A (num_slots, *inner_shape) tensor with random contents (so that "unchanged" means something);
    when `paged`, a view into a wider per-slot page (slot stride larger than the tensor's own size,
    inner dims contiguous), as a paged allocator hands out: paged=True puts the view 3 elements into
    its page (off the 16-byte grid), paged="aligned" one 16-byte vector in (base and slot stride
    on the grid, when the inner size is a whole number of vectors)."""
    inner = math.prod(inner_shape)
    if not paged:
        return torch.randn(num_slots, *inner_shape, generator=gen).to(dtype).to(device)
    assert paged is True or paged == "aligned", f"paged must be False, True or 'aligned', got {paged!r}"
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    pad_before, pad_after = (3, 5) if paged is True else (vec, vec)
    page = torch.randn(num_slots, pad_before + inner + pad_after, generator=gen).to(dtype).to(device)
    t = page[:, pad_before:pad_before + inner].view(num_slots, *inner_shape)
    assert t.stride(0) == pad_before + inner + pad_after and not t.is_contiguous()
    return t


def alloc_cache(fam, num_slots, R, state_dtype, act, device, gen, *, paged):
    cache = {"state": alloc_per_slot(num_slots, fam.state_shape(), state_dtype, device, gen, paged=paged)}
    dts = fam.ring_dtypes(act)
    for name, shape in fam.ring_shapes(R).items():
        cache[name] = alloc_per_slot(num_slots, shape, dts[name], device, gen, paged=paged)
    return cache


def snapshot(cache):
    return {k: v.detach().clone() for k, v in cache.items()}


class CursorModel:
    """The expected cursors of every slot (replayssm_ext.cursor_rules) next to the device tensors."""

    def __init__(self, num_slots, Bcap, T, R, device, gen):
        self.Bcap, self.T, self.R = Bcap, T, R
        # Junk in every slot: only reset slots are used; the rest must stay untouched.
        self.dev = {"hist": torch.randint(0, 1000, (num_slots,), generator=gen, dtype=torch.int32).to(device),
                    "start": torch.randint(0, 1000, (num_slots,), generator=gen, dtype=torch.int32).to(device),
                    "flush": torch.randint(0, 2, (num_slots,), generator=gen, dtype=torch.int8).to(device)}
        h, s, f = (self.dev[k].cpu().tolist() for k in ("hist", "start", "flush"))
        self.model = [cursor_rules.Cursor(a, b, c) for a, b, c in zip(h, s, f)]

    def reset(self, slot_ids: List[int], null_slot=None):
        device = self.dev["hist"].device
        slots = torch.tensor(slot_ids, dtype=torch.int32, device=device)
        torch.ops.replayssm.reset(slots, self.dev["hist"], self.dev["start"], self.dev["flush"], self.Bcap, self.T,
                                  null_slot)
        for s in slot_ids:
            if cursor_rules.slot_is_live(s, null_slot, len(self.model)):
                self.model[s] = cursor_rules.reset_cursor(self.Bcap, self.T)
        self.check("reset")

    def commit(self, slot_ids: List[int], accepted: List[int], null_slot=None):
        device = self.dev["hist"].device
        torch.ops.replayssm.commit(torch.tensor(slot_ids, dtype=torch.int32, device=device),
                                   torch.tensor(accepted, dtype=torch.int32, device=device),
                                   self.dev["hist"], self.dev["start"], self.dev["flush"], self.Bcap, self.T,
                                   self.R, null_slot)
        for s, a in zip(slot_ids, accepted):
            if cursor_rules.slot_is_live(s, null_slot, len(self.model)):
                self.model[s] = cursor_rules.commit_cursor(self.model[s], a, self.Bcap, self.T, self.R)
        self.check("commit")

    def check(self, what):
        got = list(zip(*(self.dev[k].cpu().tolist() for k in ("hist", "start", "flush"))))
        want = [tuple(c) for c in self.model]
        bad = [(s, g, w) for s, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"cursors after {what} differ from cursor_rules (slot, got, want): {bad[:5]}"


# --------------------------------------------------------------------------------------------
# The step-by-step driver
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class SimConfig:
    mode: str = "spec"          # "decode" (n = 1 through *_decode) or "spec" (*_spec_verify)
    Bcap: int = 8
    T: int = 2
    ring_extra: int = 0         # R = Bcap + T + ring_extra
    rows: int = 4
    spare_slots: int = 3        # slots never used by any row (must stay bit-identical)
    steps: int = 40
    state: str = "fp32"
    act: str = "fp32"
    paged: Union[bool, str] = False  # alloc_per_slot: True (off the 16-byte grid) or "aligned"
    null_slot: Optional[int] = None   # a second padding id (a real slot index that is never live)
    pad_prob: float = 0.1       # per step and row: the row is padding this step
    reset_prob: float = 0.03    # per step and row: the sequence is replaced (prefill + reset)
    fold_prob: float = 0.0      # per step: fold on demand (*_flush + reset) on a random subset
    stagger: bool = True        # row r starts r steps late (padding until then): mixed flush phases
    route: Optional[str] = None
    varlen: bool = True         # spec: n drawn in 1..T per row (else n = T)
    strided_out: bool = False   # out is a view one element into a wider buffer, odd row stride
    device: str = "cpu"
    seed: int = 0


@dataclasses.dataclass
class SimStats:
    steps: int = 0
    flush_rows: int = 0
    min_flushes_per_row: int = 0
    pad_rows: int = 0
    folds: int = 0
    mixed_phase_steps: int = 0  # steps whose live rows had flush and non-flush rows together
    fa_ratios: Dict[str, float] = dataclasses.field(default_factory=dict)  # err / bound per category


class Sim:
    def __init__(self, fam, cfg: SimConfig):
        self.fam, self.cfg = fam, cfg
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.sd, self.act = DTYPES[cfg.state], DTYPES[cfg.act]
        self.R = cfg.Bcap + cfg.T + cfg.ring_extra
        self.num_slots = cfg.rows + cfg.spare_slots + (1 if cfg.null_slot is not None else 0)
        assert cfg.null_slot is None or 0 <= cfg.null_slot < self.num_slots
        self.layer = fam.make_layer(self.gen)
        self.layer_dev = to_device(self.layer, cfg.device)
        self.cache = alloc_cache(fam, self.num_slots, self.R, self.sd, self.act, cfg.device, self.gen,
                                 paged=cfg.paged)
        self.cursors = CursorModel(self.num_slots, cfg.Bcap, cfg.T, self.R, cfg.device, self.gen)
        # Row r owns a fixed slot; never the null slot; a permutation, not the identity.
        usable = [s for s in range(self.num_slots) if s != cfg.null_slot]
        perm = torch.randperm(len(usable), generator=self.gen).tolist()
        self.row_slot = [usable[i] for i in perm[:cfg.rows]]
        zero = torch.zeros(cfg.rows, *fam.state_shape())
        self.truth = Recurrence(fam, self.layer, zero, truth=True, state_dtype=self.sd, act=self.act)
        self.pt = Recurrence(fam, self.layer, zero, truth=False, state_dtype=self.sd, act=self.act)
        self.started = [False] * cfg.rows
        self.flushes = [0] * cfg.rows
        self.fa = FACheck()
        self.stats = SimStats()

    # --- sequence lifecycle ---
    def _prefill(self, rows: List[int]):
        """A new sequence in each row: the checkpoint gets a prefill state, then reset."""
        for r in rows:
            s = self.row_slot[r]
            S0 = self.fam.random_state(self.gen, (), self.sd)
            self.cache["state"][s].copy_(S0.to(self.cfg.device))
            self.truth.S[r] = S0.to(torch.float64)
            self.pt.S[r] = S0.to(torch.float32)
            self.started[r] = True
        self.cursors.reset([self.row_slot[r] for r in rows], self.cfg.null_slot)

    # --- one step ---
    def step(self, k: int, before_op=None):
        """One model step: the op on every row, every check, then commit. `before_op(sim, live,
        slot_ids)` runs just before the op (the teeth test corrupts the ring there)."""
        cfg, fam, dev = self.cfg, self.fam, self.cfg.device
        rand = lambda: torch.rand((), generator=self.gen).item()  # noqa: E731
        # New arrivals (staggered) and replacements.
        arrive = [r for r in range(cfg.rows) if not self.started[r] and (not cfg.stagger or k >= r)]
        replace = [r for r in range(cfg.rows) if self.started[r] and rand() < cfg.reset_prob]
        if arrive or replace:
            self._prefill(arrive + replace)
        if cfg.fold_prob and rand() < cfg.fold_prob:
            self._fold_on_demand(k)

        live = [self.started[r] and rand() >= cfg.pad_prob for r in range(cfg.rows)]
        pad_ids = [-1] + ([cfg.null_slot] if cfg.null_slot is not None else [])
        slot_ids = [self.row_slot[r] if live[r] else pad_ids[int(torch.randint(len(pad_ids), (), generator=self.gen))]
                    for r in range(cfg.rows)]
        if cfg.mode == "decode":
            ns = [1] * cfg.rows
        elif cfg.varlen:
            ns = torch.randint(1, cfg.T + 1, (cfg.rows,), generator=self.gen).tolist()
        else:
            ns = [cfg.T] * cfg.rows
        toks = fam.make_tokens(self.gen, (cfg.rows, max(ns)), self.act)

        # Pack the op inputs: decode (batch, ...); spec varlen (tokens, ...) + cu_seqlens.
        if cfg.mode == "decode":
            op_tok = {n: v[:, 0] for n, v in toks.items()}
        else:
            op_tok = {n: torch.cat([v[r, :ns[r]] for r in range(cfg.rows)]) for n, v in toks.items()}
        cu = [0] + torch.cumsum(torch.tensor(ns), 0).tolist()
        out_buf, out, out_gaps = alloc_out(cu[-1], fam.out_shape(), self.act, dev, strided=cfg.strided_out)
        slots_t = torch.tensor(slot_ids, dtype=torch.int32, device=dev)
        if before_op is not None:
            before_op(self, live, slot_ids)
        before = {name: t.cpu().clone() for name, t in self.cache.items()}
        out_before = out.cpu().clone()
        out_buf_before = out_buf.cpu().clone() if cfg.strided_out else None  # else out_buf is out
        model = list(self.cursors.model)

        op_tok_dev = to_device(op_tok, dev)
        if cfg.mode == "decode":
            route = {} if cfg.route is None else {"route": cfg.route}
            fam.decode(op_tok_dev, self.layer_dev, slots_t, self.cursors.dev, self.cache, out, cfg.null_slot,
                       **route)
        else:
            fam.spec_verify(op_tok_dev, self.layer_dev, torch.tensor(cu, dtype=torch.int32, device=dev), slots_t,
                            self.cursors.dev, self.cache, out, cfg.T, cfg.null_slot)
        self.cursors.check(f"{cfg.mode} step {k} (steps must not write cursors)")
        out_c = out.cpu()
        after = {name: t.cpu() for name, t in self.cache.items()}
        if cfg.strided_out:
            assert same_bytes(out_buf.cpu()[out_gaps], out_buf_before[out_gaps]), \
                f"step {k}: an element of out's buffer outside the out view was written"

        # Padding rows: outputs untouched.
        for r in range(cfg.rows):
            if not live[r]:
                assert same_bytes(out_c[cu[r]:cu[r + 1]], out_before[cu[r]:cu[r + 1]]), \
                    f"step {k}: padding row {r} (slot id {slot_ids[r]}) had its outputs written"
                self.stats.pad_rows += 1

        # Truth and pt over the live rows' windows, all rows at once (tokens past a row's n unused).
        L = [r for r in range(cfg.rows) if live[r]]
        accepted = [1] * cfg.rows
        touched = {name: torch.zeros(self.num_slots, self.R, dtype=torch.bool) for name in fam.ring_names}
        if L:
            sub = {n: v[L] for n, v in toks.items()}
            nmax = max(ns[r] for r in L)
            yt, st, et = self.truth.run(sub, nmax, rows=L)
            yp, sp, ep = self.pt.run(sub, nmax, rows=L)
            ys_o, ys_t, ys_p, fl_o, fl_t, fl_p = [], [], [], [], [], []
            for j, r in enumerate(L):
                s, n, c = self.row_slot[r], ns[r], model[self.row_slot[r]]
                ys_o.append(out_c[cu[r]:cu[r + 1]]), ys_t.append(yt[j, :n]), ys_p.append(yp[j, :n])
                if c.flush:  # the checkpoint now holds the state after every accepted token so far
                    fl_o.append(after["state"][s])
                    fl_t.append(self.truth.S[r].clone())  # S is updated in place on acceptance
                    fl_p.append(self.pt.S[r].clone())
                    self.flushes[r] += 1
                    self.stats.flush_rows += 1
                else:
                    assert same_bytes(after["state"][s], before["state"][s]), \
                        f"step {k}: row {r} slot {s}: checkpoint written on a non-flush step (cursor {c})"
                # New ring entries at logical hist.. (after the history, folded or not; commit then
                # moves start past a folded history).
                pos = [cursor_rules.ring_index(c.start, c.hist + i, self.R) for i in range(n)]
                for name in fam.ring_names:
                    got = after[name][s][:, pos]                  # (heads, n, inner...)
                    touched[name][s, pos] = True
                    want_t = et[name][j, :n].transpose(0, 1)
                    if name in fam.exact_rings:
                        assert same_bytes(got, want_t.to(got.dtype)), \
                            f"step {k}: row {r} slot {s}: {name} entries at physical {pos} are not the inputs"
                    else:  # the pt implementation would store its value in the ring's dtype too
                        self.fa.add(name, f"step {k} row {r}", got, want_t,
                                    ep[name][j, :n].transpose(0, 1).to(got.dtype), got.dtype)
                # Acceptance: the truth moves to the state after the accepted prefix.
                a = int(torch.randint(1, n + 1, (), generator=self.gen)) if cfg.mode == "spec" else 1
                accepted[r] = a
                self.truth.S[r] = st[a - 1, j]
                self.pt.S[r] = sp[a - 1, j]
            self.fa.add("outputs", f"step {k}", torch.cat(ys_o), torch.cat(ys_t), torch.cat(ys_p), self.act)
            if 0 < len(fl_o) < len(L):
                self.stats.mixed_phase_steps += 1
            if fl_o:
                self.fa.add("checkpoint after a flush step", f"step {k}", torch.stack(fl_o), torch.stack(fl_t),
                            torch.stack(fl_p), self.sd)

        # Everything not written: bit-identical (idle and padding slots, non-window ring entries).
        live_slots = {self.row_slot[r] for r in L}
        for s in range(self.num_slots):
            if s not in live_slots:
                assert same_bytes(after["state"][s], before["state"][s]), f"step {k}: state of idle slot {s} changed"
        for name in fam.ring_names:
            keep = ~touched[name]
            assert same_bytes(after[name].transpose(1, 2)[keep], before[name].transpose(1, 2)[keep]), \
                f"step {k}: {name} changed outside the expected physical entries"

        self.cursors.commit(slot_ids, accepted, cfg.null_slot)
        self.stats.steps += 1

    def _fold_on_demand(self, k):
        """*_flush on a random subset of started rows (+ padding rows), then reset them."""
        cfg = self.cfg
        rows = [r for r in range(cfg.rows) if self.started[r] and torch.rand((), generator=self.gen) < 0.5]
        if not rows:
            return
        slot_ids = [self.row_slot[r] for r in rows] + [-1] + ([cfg.null_slot] if cfg.null_slot is not None else [])
        before = {n: t.cpu().clone() for n, t in self.cache.items()}
        self.fam.flush(self.layer_dev, torch.tensor(slot_ids, dtype=torch.int32, device=cfg.device),
                       self.cursors.dev, self.cache, cfg.null_slot)
        self.cursors.check("fold on demand (flush must not write cursors)")
        after = {n: t.cpu() for n, t in self.cache.items()}
        for name in self.fam.ring_names:
            assert same_bytes(after[name], before[name]), f"fold on demand wrote {name}"
        got = torch.stack([after["state"][self.row_slot[r]] for r in rows])
        self.fa.add("checkpoint after a fold on demand", f"before step {k}", got, self.truth.S[rows],
                    self.pt.S[rows], self.sd)
        folded = {self.row_slot[r] for r in rows}
        for s in range(self.num_slots):
            if s not in folded:
                assert same_bytes(after["state"][s], before["state"][s]), f"fold on demand changed slot {s}"
        # The fold changes nothing in the math: truth and pt continue from their own states.
        self.cursors.reset([self.row_slot[r] for r in rows], cfg.null_slot)
        self.stats.folds += 1

    def run(self, steps=None):
        """Runs `steps` (default cfg.steps) steps, then asserts the tolerance rule over the run."""
        for _ in range(self.cfg.steps if steps is None else steps):
            self.step(self.stats.steps)
        return self.finish()

    def finish(self):
        self.stats.min_flushes_per_row = min(self.flushes)
        self.stats.fa_ratios = self.fa.ratios()
        self.fa.check()
        return self.stats


def run_checked(fam, cfg: SimConfig, min_flushes: int = 2) -> SimStats:
    """Runs a Sim (every check on every step) and asserts the run exercised what it claims: each
    row went through at least `min_flushes` flushes, i.e. at least that many full flush cycles."""
    stats = Sim(fam, cfg).run()  # asserts every check, and the tolerance rule over the run
    assert stats.min_flushes_per_row >= min_flushes, (
        f"test setup: a row flushed only {stats.min_flushes_per_row} times in {cfg.steps} steps ({stats})")
    return stats


def steps_for_cycles(Bcap: int, T: int, rows: int, cycles: int = 2, pad_prob: float = 0.1) -> int:
    """Steps enough for every row to see `cycles` flushes (run_checked asserts it): a cycle is at
    most B - T + 2 live steps (one accepted token per step), rows start up to `rows - 1` steps late,
    and padding steps (probability `pad_prob`) do not advance a row."""
    per_cycle = Bcap - T + 2
    return rows + int((cycles + 1) * per_cycle / (1.0 - pad_prob)) + 4


# --------------------------------------------------------------------------------------------
# The baseline ops (*_state_update)
# --------------------------------------------------------------------------------------------

def run_state_update(fam, device, state, act, *, rows, steps, T=None, seed=0, null_slot=None):
    """Chains `steps` calls of *_state_update (plain: T None; spec: up to T tokens per row with
    snapshot slots and random acceptance, as vLLM runs it) and checks outputs and written states
    against the recurrence (the FA rule over the run), padding outputs untouched, and that no state
    slot other than the written ones changes."""
    gen = torch.Generator().manual_seed(seed)
    sd, ad = DTYPES[state], DTYPES[act]
    layer = fam.make_layer(gen)
    layer_dev = to_device(layer, device)
    Tn = 1 if T is None else T
    num_slots = rows * Tn + 3
    cache_state = fam.random_state(gen, (num_slots,), sd).to(device)
    # Row r owns the slots blocks[r] (T of them for spec) and reads cur[r]; slot 0 is never a row's
    # (it is the null block when null_slot=0).
    perm = (torch.randperm(num_slots - 1, generator=gen)[: rows * Tn] + 1).tolist()
    blocks = [perm[r * Tn:(r + 1) * Tn] for r in range(rows)]
    cur = [b[0] for b in blocks]
    S0 = cache_state.cpu()[cur]
    truth = Recurrence(fam, layer, S0, truth=True, state_dtype=sd, act=ad)
    pt = Recurrence(fam, layer, S0, truth=False, state_dtype=sd, act=ad, ring_storage=False)
    fa = FACheck()
    pad_id = -1 if null_slot is None else null_slot
    for k in range(steps):
        pad = [bool(torch.rand((), generator=gen) < 0.2) for _ in range(rows)]
        ns = [1] * rows if T is None else torch.randint(1, T + 1, (rows,), generator=gen).tolist()
        toks = fam.make_tokens(gen, (rows, max(ns)), ad)
        slots = torch.tensor([pad_id if pad[r] else cur[r] for r in range(rows)], dtype=torch.int32)
        if T is None:
            op_tok, cu_t, snap = {n: v[:, 0] for n, v in toks.items()}, None, None
        else:
            op_tok = {n: torch.cat([v[r, :ns[r]] for r in range(rows)]) for n, v in toks.items()}
            cu_t = torch.tensor([0] + torch.cumsum(torch.tensor(ns), 0).tolist(), dtype=torch.int32).to(device)
            snap = torch.tensor(blocks, dtype=torch.int32).to(device)
        cu = [0] + torch.cumsum(torch.tensor(ns), 0).tolist()
        out = torch.full((cu[-1], *fam.out_shape()), float("nan"), dtype=ad, device=device)
        before = cache_state.cpu().clone()
        fam.state_update(to_device(op_tok, device), layer_dev, slots.to(device), cache_state, out, cu_t, snap,
                         null_slot)
        after, out_c = cache_state.cpu(), out.cpu()
        L = [r for r in range(rows) if not pad[r]]
        for r in range(rows):
            if pad[r]:
                assert torch.isnan(out_c[cu[r]:cu[r + 1]]).all(), f"step {k}: padding row {r} had its outputs written"
        written = set()
        if L:
            sub = {n: v[L] for n, v in toks.items()}
            nmax = max(ns[r] for r in L)
            yt, s_t, _ = truth.run(sub, nmax, rows=L)
            yp, s_p, _ = pt.run(sub, nmax, rows=L)
            ys_o, ys_t, ys_p, st_o, st_t, st_p = [], [], [], [], [], []
            for j, r in enumerate(L):
                n = ns[r]
                ys_o.append(out_c[cu[r]:cu[r + 1]]), ys_t.append(yt[j, :n]), ys_p.append(yp[j, :n])
                targets = [cur[r]] if T is None else blocks[r][:n]
                for i, slot in enumerate(targets):
                    st_o.append(after[slot]), st_t.append(s_t[i, j]), st_p.append(s_p[i, j])
                    written.add(slot)
                a = 1 if T is None else int(torch.randint(1, n + 1, (), generator=gen))
                cur[r] = targets[a - 1]
                truth.S[r], pt.S[r] = s_t[a - 1, j], s_p[a - 1, j]
            fa.add("outputs", f"step {k}", torch.cat(ys_o), torch.cat(ys_t), torch.cat(ys_p), ad)
            fa.add("written states", f"step {k}", torch.stack(st_o), torch.stack(st_t), torch.stack(st_p), sd)
        for s in range(num_slots):
            if s not in written:
                assert same_bytes(after[s], before[s]), f"step {k}: state slot {s} changed but was not written"
    fa.check()


# --------------------------------------------------------------------------------------------
# One small valid call of each op (validation and opcheck tests mutate these)
# --------------------------------------------------------------------------------------------

# Mamba-2 H=4, P=8, N=8, G=2; GDN H=2, HV=4, K=8, V=8; 5 slots, B=4, T=2, R=7; 3 rows (the last
# one padding), spec rows of 2 and 1 tokens (+1 for the padding row).
# K = V = 64: the smallest head size the CUDA GDN kernels take, so the same valid and bad calls run on both devices.
SMALL_DIMS = dict(H=4, P=8, N=8, G=2, gH=2, HV=4, K=64, V=64, slots=5, Bcap=4, T=2, R=7)


def schema_names(op: str) -> List[str]:
    return [a.name for a in getattr(torch.ops.replayssm, op).default._schema.arguments]


def valid_args(op: str, device="cpu", act=torch.bfloat16, state_dtype=torch.float32, seed=0) -> Dict[str, object]:
    """Arguments of a valid call of `op`, by schema name, in schema order (call with
    `call_op(op, args)`). Cursors sit mid-history (hist 2 and 3, one slot flushing)."""
    d = SMALL_DIMS
    g = torch.Generator().manual_seed(seed)
    H, P, N, G, gH, HV, K, V = d["H"], d["P"], d["N"], d["G"], d["gH"], d["HV"], d["K"], d["V"]
    S, R, T = d["slots"], d["R"], d["T"]
    spec = op.endswith("spec_verify") or op.endswith("state_update")
    ns = [2, 1, 1]
    L = sum(ns) if spec else 3

    def rnd(*shape, dtype=act):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=device)  # noqa: E731
    common = {
        "slots": i32([3, 1, -1]),
        "hist": i32([0, 3, 0, 2, 0]), "start": i32([0, 5, 0, 6, 0]),
        "flush": torch.tensor([0, 1, 0, 0, 0], dtype=torch.int8, device=device),
        "cu_seqlens": i32([0, 2, 3, 4]), "max_tokens": T, "null_slot": None,
    }
    a = {}
    if op in ("commit", "reset"):
        a = {"slots": common["slots"], "accepted": i32([2, 1, 0]), "hist": common["hist"],
             "start": common["start"], "flush": common["flush"], "hist_capacity": d["Bcap"], "max_tokens": T,
             "ring_len": R, "null_slot": None}
    elif op.startswith("mamba2"):
        a = {"x": rnd(L, H, P), "dt": rnd(L, H), "A": -(torch.rand(H, generator=g) + 1).to(device),
             "B": rnd(L, G, N), "C": rnd(L, G, N), "D": rnd(H, dtype=torch.float32), "z": rnd(L, H, P),
             "dt_bias": rnd(H, dtype=torch.float32), "dt_softplus": True,
             "state": rnd(S, H, P, N, dtype=state_dtype), "ring_x": rnd(S, H, R, P), "ring_B": rnd(S, G, R, N),
             "ring_dt": rnd(S, H, R, dtype=torch.float32), "out": rnd(L, H, P),
             "route": "output_only", "snapshot_slots": None}
    else:
        a = {"q": rnd(L, gH, K), "k": rnd(L, gH, K), "v": rnd(L, HV, V), "a": rnd(L, HV), "b": rnd(L, HV),
             "A_log": rnd(HV, dtype=torch.float32), "dt_bias": rnd(HV, dtype=torch.float32), "scale": K ** -0.5,
             "qk_l2norm": True, "state": rnd(S, HV, V, K, dtype=state_dtype), "ring_u": rnd(S, HV, R, V),
             "ring_k": rnd(S, gH, R, K), "ring_g": rnd(S, HV, R, dtype=torch.float32), "out": rnd(L, HV, V)}
    if op.endswith("state_update"):
        a["cu_seqlens"] = common["cu_seqlens"]
        a["snapshot_slots"] = i32([[3, 0], [1, 2], [-1, -1]])
    names = schema_names(op)
    merged = {**common, **a}
    return {n: merged[n] for n in names}


def call_op(op: str, args: Dict[str, object]):
    return getattr(torch.ops.replayssm, op)(*args.values())


def with_ring_len(args: Dict[str, object], ring_names, R: int) -> Dict[str, object]:
    """`args` (a valid_args dict) with the ring tensors `ring_names`, whose third dimension is the
    ring, replaced by random ones of R entries on the same device and dtype."""
    out = dict(args)
    for name in ring_names:
        shape = list(args[name].shape)
        shape[2] = R
        out[name] = torch.randn(shape, device=args[name].device).to(args[name].dtype)
    return out


def assert_refused_writing_nothing(op: str, args: Dict[str, object], message: str):
    """The op called with `args` by name (schema names, as valid_args gives them) raises a
    RuntimeError matching `message` and leaves every tensor argument as it was, byte for byte."""
    import pytest

    tensors = {n: v for n, v in args.items() if isinstance(v, torch.Tensor)}
    before = {n: v.clone() for n, v in tensors.items()}
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.ops.replayssm, op)(**args)
    if any(v.is_cuda for v in tensors.values()):
        torch.cuda.synchronize()
    for n, v in tensors.items():
        assert same_bytes(v, before[n]), f"{op}: a refused call wrote {n}"

_ERROR_LINES_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import replayssm_ext  # noqa: F401
import {module} as t
for case in {cases!r}:
    print(case + "|" + t._first_error_line({device!r}, case), flush=True)
"""


def error_lines_per_device(module, cases, devices=("cpu", "cuda")):
    """``{device: {case: line}}`` with ``line = <module>._first_error_line(device, case)`` (e.g.
    'RAISED:<first line of the message>'), computed in one subprocess per device. On the GPU
    machine's torch 2.11 an op's error path once crashed the process (an integer streamed into an
    ostringstream; checks.h now formats with std::to_string): in a subprocess a crash fails the
    affected cases instead of taking the test session down."""
    import subprocess
    import sys

    tests_dir = os.path.dirname(os.path.abspath(__file__))
    result = {}
    for device in devices:
        script = _ERROR_LINES_SCRIPT.format(tests=tests_dir, module=module, cases=list(cases), device=device)
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           cwd=os.path.dirname(tests_dir))
        got = dict(line.split("|", 1) for line in r.stdout.splitlines() if "|" in line)
        for case in cases:
            got.setdefault(case, f"NO RESULT (subprocess exit code {r.returncode}, stderr tail {r.stderr[-200:]!r})")
        result[device] = got
    return result
