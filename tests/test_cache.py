"""Cursors, Mamba2Cache / GDNCache (allocate, allocate_paged, from_views, byte counts), the
concurrency planner, and the Python wrappers (replayssm_ext.ops) over cache and cursor objects."""

import math

import pytest
import torch

import replayssm_ext as rs
from replayssm_ext import cache as cache_mod
from replayssm_ext.cache import (NEMOTRON3_NANO_4B, NEMOTRON3_SUPER, QWEN35_122B, QWEN35_4B, GDNGeometry,
                                 Mamba2Geometry)
from conftest import devices
from helpers import GDN, GDNGeo, Mamba2, Mamba2Geo, alloc_per_slot, same_bytes

M2 = Mamba2Geometry(nheads=4, headdim=8, dstate=16, ngroups=2)
GD = GDNGeometry(nheads=2, nheads_v=4, key_dim=8, value_dim=16)


def _alloc(kind, paged, num_slots=5, ring_len=7, act=torch.bfloat16, state=torch.float32, **kw):
    if kind == "mamba2":
        fn = rs.Mamba2Cache.allocate_paged if paged else rs.Mamba2Cache.allocate
        return fn(num_slots, M2.nheads, M2.headdim, M2.dstate, M2.ngroups, ring_len, act_dtype=act, state_dtype=state,
                  **kw)
    fn = rs.GDNCache.allocate_paged if paged else rs.GDNCache.allocate
    return fn(num_slots, GD.nheads, GD.nheads_v, GD.key_dim, GD.value_dim, ring_len, act_dtype=act,
              state_dtype=state, **kw)


def _slot_bytes(t):
    return math.prod(t.shape[1:]) * t.element_size()


# --- shapes, dtypes, bytes per slot ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["mamba2", "gdn"])
@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("act,state", [(torch.bfloat16, torch.float32), (torch.float32, torch.float16)])
def test_layout_and_bytes_per_slot(kind, paged, act, state):
    c = _alloc(kind, paged, act=act, state=state)
    R = 7
    if kind == "mamba2":
        want = {"state": ((5, 4, 8, 16), state), "ring_x": ((5, 4, R, 8), act), "ring_B": ((5, 2, R, 16), act),
                "ring_dt": ((5, 4, R), torch.float32)}
        geo = M2
    else:
        want = {"state": ((5, 4, 16, 8), state), "ring_u": ((5, 4, R, 16), act), "ring_k": ((5, 2, R, 8), act),
                "ring_g": ((5, 4, R), torch.float32)}
        geo = GD
    tensors = dict(zip(want, c.tensors()))
    for name, (shape, dtype) in want.items():
        t = tensors[name]
        assert tuple(t.shape) == shape and t.dtype == dtype, (name, t.shape, t.dtype)
        assert t.is_contiguous() != paged or t.size(0) == 1, name  # paged: strided slot dim
    actual = sum(_slot_bytes(t) for t in tensors.values())
    assert c.bytes_per_slot() == actual
    assert c.bytes_breakdown() == {n: _slot_bytes(t) for n, t in tensors.items()}
    cls = rs.Mamba2Cache if kind == "mamba2" else rs.GDNCache
    assert cls.bytes_per_slot(geo, R, act, state) == actual
    assert c.ring_len == R and c.num_slots == 5 and c.state_dtype == state and c.act_dtype == act
    assert c.geometry == geo


@pytest.mark.parametrize("kind", ["mamba2", "gdn"])
def test_paged_views_are_disjoint_pages(kind):
    """allocate_paged: one page per slot, every tensor 256-byte aligned inside it, no byte shared
    between slots or tensors: writing one slot of one tensor changes nothing else."""
    c = _alloc(kind, True, page_bytes=None)
    ts = c.tensors()
    page = ts[0].stride(0) * ts[0].element_size()
    base = ts[0].untyped_storage().data_ptr()
    for t in ts:
        assert t.untyped_storage().data_ptr() == base
        assert t.stride(0) * t.element_size() == page
        # Offsets inside the page are aligned (the allocation itself is aligned by the allocator:
        # 64 bytes on the CPU, 256 or more on CUDA).
        assert (t.data_ptr() - base) % cache_mod.PAGE_ALIGNMENT_BYTES == 0
        assert t.stride(-1) == 1
    for i, t in enumerate(ts):
        snap = [u.clone() for u in ts]
        t[2].fill_(1.0)
        for j, u in enumerate(ts):
            for s in range(u.size(0)):
                if (i, 2) == (j, s):
                    assert (u[s] == 1).all()
                else:
                    assert same_bytes(u[s], snap[j][s]), f"writing tensor {i} slot 2 changed tensor {j} slot {s}"
        t[2].copy_(snap[i][2])


def test_paged_page_bytes():
    need = _alloc("mamba2", True).ring_x.stride(0) * 2  # bytes of a default page (bf16 ring_x stride)
    c = _alloc("mamba2", True, page_bytes=need + 512)
    assert c.state.stride(0) * 4 == need + 512
    with pytest.raises(ValueError, match="page_bytes must be >= "):
        _alloc("mamba2", True, page_bytes=need - 256)
    with pytest.raises(ValueError, match="page_bytes must be a multiple of 256"):
        _alloc("mamba2", True, page_bytes=need + 100)


# --- from_views -------------------------------------------------------------------------------

def _m2_views(paged=True, num_slots=5, R=7, act=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    fam = Mamba2(Mamba2Geo(H=4, P=8, N=16, G=2))
    shapes, dts = fam.ring_shapes(R), fam.ring_dtypes(act)
    return {"state": alloc_per_slot(num_slots, fam.state_shape(), torch.float32, "cpu", g, paged=paged),
            **{n: alloc_per_slot(num_slots, shapes[n], dts[n], "cpu", g, paged=paged) for n in shapes}}


def _gdn_views(paged=True, num_slots=5, R=7, act=torch.float16):
    g = torch.Generator().manual_seed(1)
    fam = GDN(GDNGeo(H=2, HV=4, K=8, V=16))
    shapes, dts = fam.ring_shapes(R), fam.ring_dtypes(act)
    return {"state": alloc_per_slot(num_slots, fam.state_shape(), torch.bfloat16, "cpu", g, paged=paged),
            **{n: alloc_per_slot(num_slots, shapes[n], dts[n], "cpu", g, paged=paged) for n in shapes}}


def test_from_views_accepts_strided_pages_without_copying():
    v = _m2_views(paged=True)
    assert not v["state"].is_contiguous()
    c = rs.Mamba2Cache.from_views(**v)
    for name, t in zip(("state", "ring_x", "ring_B", "ring_dt"), c.tensors()):
        assert t is v[name] or t.data_ptr() == v[name].data_ptr()
    assert c.geometry == M2 and c.ring_len == 7
    g = _gdn_views(paged=True)
    cg = rs.GDNCache.from_views(**g)
    assert cg.geometry == GD and cg.act_dtype == torch.float16 and cg.state_dtype == torch.bfloat16
    assert cg.bytes_per_slot() == sum(_slot_bytes(t) for t in g.values())


def _bad(views, name, t):
    v = dict(views)
    v[name] = t
    return v


@pytest.mark.parametrize("case,expect_type,match", [
    ("ring_dt_bf16", TypeError, "ring_dt must be float32, got bfloat16"),
    ("ring_B_dtype", TypeError, "ring_B must have the dtype of ring_x"),
    ("inner_noncontig", ValueError, "ring_x must be contiguous in every dim after dim 0"),
    ("overlapping_slots", ValueError, "state slots overlap: dim 0 stride must be >= 512"),
    ("ring_len_mismatch", ValueError, "the ring tensors must agree on the ring length R"),
    ("wrong_P", ValueError, r"ring_x must have shape \(slots=5, H=4, R=7, P=8\), got \(5, 4, 7, 6\)"),
    ("groups", ValueError, "must be a multiple of G=3"),
    ("rank", ValueError, "ring_dt must have 3 dims"),
    ("device", ValueError, "ring_B must be on cpu"),
    ("state_int", TypeError, "state must be float32 or bfloat16 or float16, got int32"),
])
def test_mamba2_from_views_rejects(case, expect_type, match):
    v = _m2_views()
    R = 7
    if case == "ring_dt_bf16":
        v = _bad(v, "ring_dt", v["ring_dt"].to(torch.bfloat16))
    elif case == "ring_B_dtype":
        v = _bad(v, "ring_B", v["ring_B"].to(torch.float16))
    elif case == "inner_noncontig":
        v = _bad(v, "ring_x", v["ring_x"].transpose(-1, -2).contiguous().transpose(-1, -2))
    elif case == "overlapping_slots":  # slot stride smaller than a slot: slots alias each other
        base = torch.zeros(5 * 256 + 512)
        v = _bad(v, "state", base.as_strided((5, 4, 8, 16), (256, 128, 16, 1)))
    elif case == "ring_len_mismatch":
        v = _bad(v, "ring_dt", torch.zeros(5, 4, R + 1))
    elif case == "wrong_P":
        v = _bad(v, "ring_x", torch.zeros(5, 4, R, 6, dtype=torch.bfloat16))
    elif case == "groups":
        v = _bad(v, "ring_B", torch.zeros(5, 3, R, 16, dtype=torch.bfloat16))
    elif case == "rank":
        v = _bad(v, "ring_dt", torch.zeros(5, 4 * R))
    elif case == "device":
        v = _bad(v, "ring_B", v["ring_B"].to("meta"))
    elif case == "state_int":
        v = _bad(v, "state", torch.zeros(5, 4, 8, 16, dtype=torch.int32))
    with pytest.raises(expect_type, match=match):
        rs.Mamba2Cache.from_views(**v)


@pytest.mark.parametrize("case,expect_type,match", [
    ("ring_g_dtype", TypeError, "ring_g must be float32, got float16"),
    ("heads", ValueError, "HV=4 .* must be a multiple of H=3"),
    ("state_VK_swapped", ValueError, r"ring_u must have shape \(slots=5, HV=4, R=7, V=8\), got \(5, 4, 7, 16\)"),
    ("ring_k_inner", ValueError, "ring_k must be contiguous in every dim after dim 0"),
])
def test_gdn_from_views_rejects(case, expect_type, match):
    v = _gdn_views()
    if case == "ring_g_dtype":
        v = _bad(v, "ring_g", v["ring_g"].to(torch.float16))
    elif case == "heads":
        v = _bad(v, "ring_k", torch.zeros(5, 3, 7, 8, dtype=torch.float16))
    elif case == "state_VK_swapped":
        v = _bad(v, "state", torch.zeros(5, 4, 8, 16, dtype=torch.bfloat16))
    elif case == "ring_k_inner":
        v = _bad(v, "ring_k", v["ring_k"].transpose(-1, -2).contiguous().transpose(-1, -2))
    with pytest.raises(expect_type, match=match):
        rs.GDNCache.from_views(**v)


# --- cursors ------------------------------------------------------------------------------

@pytest.mark.parametrize("device", devices("commit", "reset"))
def test_cursors_object(device):
    cur = rs.Cursors(6, hist_capacity=8, max_tokens=2, device=device)
    assert cur.ring_len == 10 and cur.bytes_per_slot() == 9
    assert cur.hist.dtype == torch.int32 and cur.start.dtype == torch.int32 and cur.flush.dtype == torch.int8
    assert not cur.hist.any() and not cur.start.any() and not cur.flush.any()
    slots = torch.tensor([4, -1, 1], dtype=torch.int32, device=device)
    for _ in range(4):
        rs.commit(cur, slots, torch.tensor([2, 1, 1], dtype=torch.int32, device=device))
    assert cur.hist.tolist() == [0, 4, 0, 0, 8, 0] and cur.flush.tolist() == [0, 0, 0, 0, 1, 0]
    rs.reset(cur, torch.tensor([4], dtype=torch.int32, device=device))
    assert cur.hist.tolist() == [0, 4, 0, 0, 0, 0] and not cur.flush.any()
    with pytest.raises(ValueError, match="ring_len"):
        rs.Cursors(4, hist_capacity=8, max_tokens=2, ring_len=9)
    with pytest.raises(ValueError, match="hist_capacity"):
        rs.Cursors(4, hist_capacity=2, max_tokens=4)


# --- planner ---------------------------------------------------------------------------------

@pytest.mark.parametrize("family,geo", [("mamba2", NEMOTRON3_NANO_4B), ("mamba2", NEMOTRON3_SUPER),
                                        ("gdn", QWEN35_4B), ("gdn", QWEN35_122B)])
@pytest.mark.parametrize("T", [1, 2, 4, 8])
def test_planner(family, geo, T):
    budget = 80 * 2 ** 30
    plan = rs.plan_concurrency(budget, family, geo, num_layers=3, hist_capacity=16, max_tokens=T)
    cls = rs.Mamba2Cache if family == "mamba2" else rs.GDNCache
    per_layer = cls.bytes_per_slot(geo, 16 + T, torch.bfloat16, torch.float32)
    state_bytes = math.prod(cls._parts(geo, 16 + T, torch.bfloat16, torch.float32)[0][1]) * 4
    assert plan.replay_bytes_per_seq == 3 * per_layer + rs.Cursors.BYTES_PER_SLOT
    assert plan.snapshot_bytes_per_seq == 3 * T * state_bytes
    assert plan.replay_max_seqs == budget // plan.replay_bytes_per_seq
    assert plan.snapshot_max_seqs == budget // plan.snapshot_bytes_per_seq
    if T >= 2:
        assert plan.ratio > 1, plan
    else:  # plain decode: the ring costs memory the single-state baseline does not spend
        assert plan.ratio <= 1, plan


def test_planner_matches_an_allocated_cache():
    geo = Mamba2Geometry(nheads=8, headdim=16, dstate=32, ngroups=2)
    c = rs.Mamba2Cache.allocate(3, 8, 16, 32, 2, 20, act_dtype=torch.float16, state_dtype=torch.float32)
    plan = rs.plan_concurrency(10 ** 9, "mamba2", geo, num_layers=1, hist_capacity=16, max_tokens=4,
                               act_dtype=torch.float16)
    assert plan.replay_bytes_per_seq == c.bytes_per_slot() + 9
    with pytest.raises(ValueError, match="family must be 'mamba2' or 'gdn'"):
        rs.plan_concurrency(10 ** 9, "rwkv", geo)
    with pytest.raises(TypeError, match="needs a GDNGeometry"):
        rs.plan_concurrency(10 ** 9, "gdn", geo)


# --- the Python wrappers over cache / cursor objects ------------------------------------------

@pytest.mark.parametrize("device", devices("mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "commit"))
@pytest.mark.parametrize("paged", [False, True])
def test_mamba2_wrappers_equal_raw_ops(device, paged):
    """ops.mamba2_* with cache= / cursors= do exactly what the raw op does on the same tensors."""
    g = torch.Generator().manual_seed(3)
    fam = Mamba2(Mamba2Geo(H=4, P=8, N=16, G=2))
    layer = {k: (v.to(device) if v is not None else None) for k, v in fam.make_layer(g).items()}
    c = _alloc("mamba2", paged, ring_len=10, device=device)
    for t in c.tensors():
        t.copy_(torch.randn(t.shape, generator=g).to(t.dtype))
    cur = rs.Cursors(5, hist_capacity=8, max_tokens=2, device=device)
    raw = [t.clone() for t in c.tensors()]
    raw_cur = {n: getattr(cur, n).clone() for n in ("hist", "start", "flush")}
    slots = torch.tensor([3, 0, -1], dtype=torch.int32, device=device)
    for step in range(12):
        tok = {k: v.to(device) for k, v in fam.make_tokens(g, (3,), torch.bfloat16).items()}
        out = rs.mamba2_decode(tok["x"], tok["dt"], layer["A"], tok["B"], tok["C"], D=layer["D"], z=tok["z"],
                               dt_bias=layer["dt_bias"], slots=slots, cache=c, cursors=cur,
                               out=torch.zeros(3, 4, 8, dtype=torch.bfloat16, device=device))
        out_raw = torch.zeros_like(out)
        torch.ops.replayssm.mamba2_decode(tok["x"], tok["dt"], layer["A"], tok["B"], tok["C"], layer["D"], tok["z"],
                                          layer["dt_bias"], True, slots, raw_cur["hist"], raw_cur["start"],
                                          raw_cur["flush"], *raw, out_raw, "output_only", None)
        assert same_bytes(out, out_raw)
        acc = torch.ones(3, dtype=torch.int32, device=device)
        rs.commit(cur, slots, acc)
        torch.ops.replayssm.commit(slots, acc, raw_cur["hist"], raw_cur["start"], raw_cur["flush"], 8, 2, 10, None)
        for a, b in zip(c.tensors(), raw):
            assert same_bytes(a, b), f"step {step}"
    rs.mamba2_flush(layer["A"], slots=slots, cache=c, cursors=cur)
    torch.ops.replayssm.mamba2_flush(layer["A"], slots, raw_cur["hist"], raw_cur["start"], *raw, None)
    assert same_bytes(c.state, raw[0])


def test_wrapper_argument_errors():
    c = _alloc("mamba2", False, ring_len=10)
    cur = rs.Cursors(5, hist_capacity=8, max_tokens=1)   # R = 9 != 10
    x = torch.zeros(1, 4, 8, dtype=torch.bfloat16)
    args = (x, torch.zeros(1, 4, dtype=torch.bfloat16), -torch.ones(4), torch.zeros(1, 2, 16, dtype=torch.bfloat16),
            torch.zeros(1, 2, 16, dtype=torch.bfloat16))
    slots = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="ring length"):
        rs.mamba2_decode(*args, slots=slots, cache=c, cursors=cur)
    with pytest.raises(TypeError, match="not both"):
        rs.mamba2_decode(*args, slots=slots, cache=c, cursors=rs.Cursors(5, 8, 2), state=c.state)
    with pytest.raises(TypeError, match="missing"):
        rs.mamba2_decode(*args, slots=slots, cursors=rs.Cursors(5, 8, 2), state=c.state)
