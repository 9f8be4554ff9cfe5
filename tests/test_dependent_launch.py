"""Programmatic dependent launch (csrc/include/replayssm/common/dependent_launch.cuh): the kernels
of the library are launched so that they may be scheduled while the kernel before them still runs
(every launch site but two, measured to lose; REPLAYSSM_PDL=1 forces the attribute on all of
them, as here), and every kernel waits for the one before it (griddepcontrol.wait) before its
first access to memory.

- A model's steps back to back in one stream, two layers of each family and the commit per step
  (each decode reads the cursors the commit just before it wrote, and the ring entries and
  checkpoints of the step before), eagerly and captured whole in one CUDA graph: outputs, rings,
  checkpoints and cursors are bit-identical to the same steps launched without the attribute
  (REPLAYSSM_PDL=0). A kernel that read before its wait would see the cursors or rings of an
  earlier step at random, and differ.
- The same for speculative decoding: the spec verify of both families with one commit per step,
  and the per-draft snapshot state updates of both families (each reading the snapshot the step
  before accepted), with the attribute forced on, with the sites' own choice and without it.
- REPLAYSSM_PDL other than 0 / 1 is an error that names the variable, and the launch writes
  nothing.

CUDA only: skipped where there is no GPU or the kernels are not built.
"""

import pytest
import torch

from conftest import cuda_skip_reason
from helpers import GDN, GDNGeo, Mamba2, Mamba2Geo, call_op, same_bytes, valid_args

OPS = ("mamba2_decode", "gdn_decode", "commit")
_SKIP = cuda_skip_reason(OPS)
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")

M2 = Mamba2Geo(H=8, P=64, N=128, G=2)
GD = GDNGeo(H=2, HV=4, K=128, V=128)


def _run_once(run, graph: bool):
    """Runs `run` eagerly, or captured whole in one CUDA graph and replayed once."""
    torch.cuda.synchronize()
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream), torch.cuda.graph(cuda_graph, stream=stream):
            run()
        torch.cuda.current_stream().wait_stream(stream)
        cuda_graph.replay()
    else:
        run()
    torch.cuda.synchronize()


def _cursors(num_slots):
    return {"hist": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
            "start": torch.zeros(num_slots, dtype=torch.int32, device="cuda"),
            "flush": torch.zeros(num_slots, dtype=torch.int8, device="cuda")}


def _layer(fam, gen, num_slots, R, snapshot_slots=0):
    """One layer on the GPU: its parameters, fp32 checkpoints of num_slots slots (and, for the
    snapshot baseline, snapshot_slots more as "snap_state"), bf16 rings of length R."""
    params = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in fam.make_layer(gen).items()}
    cache = {"state": fam.random_state(gen, (num_slots,), torch.float32).cuda()}
    if snapshot_slots:
        cache["snap_state"] = fam.random_state(gen, (snapshot_slots,), torch.float32).cuda()
    for name, shape in fam.ring_shapes(R).items():
        cache[name] = torch.randn(num_slots, *shape, generator=gen).to(fam.ring_dtypes(torch.bfloat16)[name]).cuda()
    return fam, params, cache


def _on_cpu(outputs, layers, cur):
    """Every output (outputs: name prefix -> [step][layer] tensors), cache tensor and cursor, on
    the CPU, by name."""
    result = {f"{prefix}{k}.{i}": o.cpu() for prefix, steps in outputs.items()
              for k, step in enumerate(steps) for i, o in enumerate(step)}
    result.update({f"{name}.{i}": t.cpu() for i, (_, _, cache) in enumerate(layers) for name, t in cache.items()})
    result.update({name: t.cpu() for name, t in cur.items()})
    return result


def _assert_same_bytes(got, want, mode):
    for name in want:
        assert same_bytes(got[name], want[name]), f"{mode}: {name} differs from stream order without the attribute"


def _model_steps(mode, monkeypatch):
    """Runs 3 flush cycles of a two-family model (B = 4, T = 1; four layers, one commit per step)
    from fixed caches, eagerly or captured in one CUDA graph and replayed once. Returns every
    output, cache tensor and cursor, on the CPU."""
    monkeypatch.setenv("REPLAYSSM_PDL", "1" if mode.endswith("pdl") else "0")
    gen = torch.Generator().manual_seed(21)
    Bcap, num_slots = 4, 8
    R = Bcap + 1
    slots = torch.tensor([5, 0, -1, 3, 7, 1], dtype=torch.int32, device="cuda")
    rows = slots.numel()
    ones = torch.ones(rows, dtype=torch.int32, device="cuda")
    cur = _cursors(num_slots)
    layers = [_layer(fam, gen, num_slots, R) for fam in (Mamba2(M2), Mamba2(M2), GDN(GD), GDN(GD))]
    # Mixed phases: live row i has committed i % (B + 1) entries before the run.
    for i, s in enumerate(slots[slots >= 0].tolist()):
        for _ in range(i % (Bcap + 1)):
            torch.ops.replayssm.commit(torch.tensor([s], dtype=torch.int32, device="cuda"), ones[:1], cur["hist"],
                                       cur["start"], cur["flush"], Bcap, 1, R)
    steps = 3 * (Bcap + 1)
    toks = [[{n: v[:, 0].cuda() for n, v in fam.make_tokens(gen, (rows, 1), torch.bfloat16).items()}
             for fam, _, _ in layers] for _ in range(steps)]
    outs = [[torch.full((rows, *fam.out_shape()), float("nan"), dtype=torch.bfloat16, device="cuda")
             for fam, _, _ in layers] for _ in range(steps)]

    def run():
        for k in range(steps):
            for (fam, params, cache), tok, out in zip(layers, toks[k], outs[k]):
                fam.decode(tok, params, slots, cur, cache, out, None)
            torch.ops.replayssm.commit(slots, ones, cur["hist"], cur["start"], cur["flush"], Bcap, 1, R)

    _run_once(run, mode.startswith("graph"))
    return _on_cpu({"out": outs}, layers, cur)


@pytest.mark.parametrize("mode", ["eager_pdl", "graph_pdl", "graph_plain"])
def test_dependent_launches_match_stream_order(mode, monkeypatch):
    """The model's steps with the launch attribute (eager, and one graph of every step) and without
    it in a graph give the bytes of the eager run without it."""
    want = _model_steps("eager_plain", monkeypatch)
    got = _model_steps(mode, monkeypatch)
    for name, out in want.items():
        if name.startswith("out"):  # row 2 is padding (slot -1)
            assert not torch.isnan(out[[0, 1, 3, 4, 5]].float()).any(), f"test setup: {name} not written"
            assert torch.isnan(out[2].float()).all(), f"padding row of {name} written"
    _assert_same_bytes(got, want, mode)


@pytest.mark.parametrize("op", ["mamba2_decode", "gdn_decode", "commit"])
@pytest.mark.parametrize("value", ["2", "on"])
def test_dependent_launch_variable_errors(op, value, monkeypatch):
    """REPLAYSSM_PDL other than 0 / 1: the error names the variable, and nothing is written."""
    args = valid_args(op, device="cuda")
    written = {n: v for n, v in args.items() if isinstance(v, torch.Tensor)}
    before = {n: v.clone() for n, v in written.items()}
    monkeypatch.setenv("REPLAYSSM_PDL", value)
    with pytest.raises(RuntimeError, match="REPLAYSSM_PDL must be 0 or 1"):
        call_op(op, args)
    torch.cuda.synchronize()
    for n in written:
        assert same_bytes(written[n], before[n]), f"a failed launch wrote {n}"


def _spec_steps(mode, monkeypatch):
    """Spec verify of both families (T = 4, windows of 1..4 tokens, accepted counts drawn once) and
    the per-draft snapshot state update of both families (each step reading the snapshot the step
    before accepted), back to back with one commit per step, over 3 flush cycles: eagerly or in one
    CUDA graph. mode: "<eager|graph>_<0|1|default>" sets REPLAYSSM_PDL (default: unset, the launch
    sites' own choice). Batch 1 and batch 3 windows alternate, so the Mamba-2 spec verify runs at
    both of its choices. Returns every output, cache tensor and cursor, on the CPU."""
    how, pdl = mode.split("_")
    if pdl == "default":
        monkeypatch.delenv("REPLAYSSM_PDL", raising=False)
    else:
        monkeypatch.setenv("REPLAYSSM_PDL", pdl)
    gen = torch.Generator().manual_seed(22)
    Bcap, T, num_slots = 4, 4, 8
    R = Bcap + T
    all_slots = torch.tensor([5, 0, -1, 3], dtype=torch.int32, device="cuda")
    cur = _cursors(num_slots)
    # snapshot baseline: row r's T snapshot slots are 4r .. 4r + 3 of "snap_state"
    layers = [_layer(fam, gen, num_slots, R, snapshot_slots=4 * T) for fam in (Mamba2(M2), GDN(GD))]
    steps = 3 * (Bcap + 1)
    plan = []
    for k in range(steps):
        slots = all_slots[:1] if k % 2 == 0 else all_slots[1:]  # batch 1, then batch 3 (one padding row)
        rows = slots.numel()
        ns = torch.randint(1, T + 1, (rows,), generator=gen)
        acc = torch.minimum(torch.randint(1, T + 1, (rows,), generator=gen), ns)
        cu = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(ns, 0)]).to(torch.int32)
        tok = [{n: torch.cat([v[r, :int(ns[r])] for r in range(rows)]).cuda()
                for n, v in fam.make_tokens(gen, (rows, T), torch.bfloat16).items()} for fam, _, _ in layers]
        plan.append((slots, ns, acc.to(torch.int32).cuda(), cu.cuda(), tok))
    outs = [[torch.full((int(p[1].sum()), *fam.out_shape()), float("nan"), dtype=torch.bfloat16, device="cuda")
             for fam, _, _ in layers] for p in plan]
    snap_outs = [[o.clone() for o in step] for step in outs]
    # Snapshot rows read the slot their previous step accepted; row r's snapshots are 4r + [0, T).
    snap_rows = 3
    read_slot = torch.arange(snap_rows, dtype=torch.int32, device="cuda") * T
    snap_slots = (torch.arange(snap_rows, dtype=torch.int32, device="cuda")[:, None] * T
                  + torch.arange(T, dtype=torch.int32, device="cuda")[None, :])

    def run():
        for k, (slots, ns, acc, cu, tok) in enumerate(plan):
            for (fam, params, cache), t, out in zip(layers, tok, outs[k]):
                fam.spec_verify(t, params, cu, slots, cur, cache, out, T, None)
            torch.ops.replayssm.commit(slots, acc, cur["hist"], cur["start"], cur["flush"], Bcap, T, R)
            rows = slots.numel()
            src = read_slot[:rows]
            for (fam, params, cache), t, out in zip(layers, tok, snap_outs[k]):
                fam.state_update(t, params, src, cache["snap_state"], out, cu, snap_slots[:rows], None)
            src.copy_(snap_slots[:rows].gather(1, (acc.long() - 1)[:, None])[:, 0])

    _run_once(run, how == "graph")
    return _on_cpu({"out": outs, "snap_out": snap_outs}, layers, cur)


@pytest.mark.parametrize("mode", ["eager_1", "eager_default", "graph_1", "graph_default", "graph_0"])
def test_dependent_launches_match_stream_order_spec(mode, monkeypatch):
    """Spec verify, commit and the snapshot state updates, with the attribute on every launch, with
    the sites' own choice (eager and in a graph) and without it in a graph, give the bytes of the
    eager run without it."""
    want = _spec_steps("eager_0", monkeypatch)
    got = _spec_steps(mode, monkeypatch)
    for name, out in want.items():
        if name.startswith(("out", "snap_out")):
            assert not torch.isnan(out.float()).all(), f"test setup: {name} not written"
    _assert_same_bytes(got, want, mode)
