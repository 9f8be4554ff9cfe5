"""The main job: the classic decode step side by side with ReplaySSM.

``python -m replayssm_ext`` (console script ``replayssm-bench``):

- on a machine with a GPU and the CUDA kernels built in, runs the GPU benchmark
  (``replayssm_ext.benchmark``; every argument is passed on to it, ``--help`` lists them);
- otherwise (or with ``--cpu``) runs a small comparison through the CPU ops: the classic step
  (``mamba2_state_update`` / ``gdn_state_update``) against the ReplaySSM decode step
  (``mamba2_decode`` on both routes / ``gdn_decode``) over a few flush cycles of plain decoding
  (T = 1), all checked against the float64 sequential recurrence. The CPU ops are the Python
  reference of the replay formulation, so the wall times say nothing about GPU speed; the byte
  counts are the analytic HBM traffic a kernel would have.

Exit status 1 when a replay error exceeds twice the classic step's error against the float64
truth plus a small floor (the tolerance rule of the test suite).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from typing import Callable, List, Optional

import torch

import replayssm_ext
from replayssm_ext import reference
from replayssm_ext.cache import NEMOTRON3_NANO_4B, QWEN35_4B, Cursors, GDNCache, GDNGeometry, Mamba2Cache, Mamba2Geometry

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Absolute error floor of the tolerance rule, for outputs of order 1.
ERROR_FLOOR = 1e-5


@dataclasses.dataclass
class RunResult:
    """One op driven over `steps` decode steps."""

    op: str
    steps: int
    flush_rows: int              # rows that folded their history (summed over steps)
    ms_per_step: float
    y: torch.Tensor              # (steps, batch, heads, dim) float64
    final_state: torch.Tensor    # (batch, ...) float64, the state after the last step (replay: folded)
    state_bytes: float           # analytic checkpoint / state traffic, summed over steps
    ring_bytes: float            # analytic ring traffic, summed over steps


def _parse_cpu_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m replayssm_ext",
        description="Classic SSM decode step vs ReplaySSM, through the CPU ops (see the module docstring; "
                    "with a GPU and the CUDA kernels, the arguments go to replayssm_ext.benchmark instead).")
    p.add_argument("--cpu", action="store_true", help="run this CPU comparison even where a GPU is available")
    p.add_argument("--batch", type=int, default=4, help="rows (sequences) per step (default 4)")
    p.add_argument("--steps", type=int, default=24, help="decode steps (default 24: flushes at steps 8 and 16 with B=8)")
    p.add_argument("--hist-capacity", type=int, default=8, help="B, the ring's history capacity (default 8)")
    p.add_argument("--mamba2-heads", type=int, default=NEMOTRON3_NANO_4B.nheads,
                   help=f"Mamba-2 heads H, a multiple of G={NEMOTRON3_NANO_4B.ngroups} "
                        f"(default {NEMOTRON3_NANO_4B.nheads}, Nemotron-3-Nano-4B)")
    p.add_argument("--act-dtype", choices=sorted(DTYPES), default="fp32",
                   help="activation / ring dtype (default fp32; the checkpoint is fp32)")
    p.add_argument("--family", choices=["mamba2", "gdn", "all"], default="all")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.batch < 1 or args.steps < 1:
        p.error(f"--batch and --steps must be >= 1, got {args.batch} and {args.steps}")
    return args


def _timed_steps(steps: int, step: Callable[[int], None]) -> float:
    t0 = time.perf_counter()
    for t in range(steps):
        step(t)
    return 1e3 * (time.perf_counter() - t0) / steps


def _bytes_of(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


# --------------------------------------------------------------------------------------------
# Mamba-2
# --------------------------------------------------------------------------------------------

def _mamba2_inputs(geom: Mamba2Geometry, steps: int, batch: int, act: torch.dtype, gen: torch.Generator) -> dict:
    H, P, N, G = geom.H, geom.P, geom.N, geom.G

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen)).to(act)

    return dict(
        x=randn(steps, batch, H, P), dt=randn(steps, batch, H, scale=0.5),
        B=randn(steps, batch, G, N, scale=N ** -0.5), C=randn(steps, batch, G, N, scale=N ** -0.5),
        z=randn(steps, batch, H, P),
        A=-torch.exp(torch.empty(H).uniform_(-2.0, 1.0, generator=gen)),
        D=torch.randn(H, generator=gen), dt_bias=torch.empty(H).uniform_(-3.0, -1.0, generator=gen),
        state0=0.1 * torch.randn(batch, H, P, N, generator=gen),
    )


def _per_row_truth(batch: int, recurrence):
    """The fp64 sequential recurrence of each row: outputs stacked as (steps, batch, ...) and final
    states as (batch, ...). recurrence(r) runs row r and returns (y, final state)."""
    ys, finals = zip(*(recurrence(r) for r in range(batch)))
    return torch.stack(ys, dim=1), torch.stack(finals)


def _mamba2_truth(inp: dict, batch: int):
    return _per_row_truth(batch, lambda r: reference.mamba2_recurrence(
        inp["x"][:, r], inp["dt"][:, r], inp["A"], inp["B"][:, r], inp["C"][:, r], D=inp["D"], z=inp["z"][:, r],
        dt_bias=inp["dt_bias"], dt_softplus=True, state=inp["state0"][r], dtype=torch.float64))


def _mamba2_classic(geom, inp, steps, batch, slots, num_slots) -> RunResult:
    H, P, N = geom.H, geom.P, geom.N
    state = torch.zeros(num_slots, H, P, N)
    state[slots.long()] = inp["state0"]
    out = torch.empty_like(inp["x"])

    def step(t):
        replayssm_ext.mamba2_state_update(
            inp["x"][t], inp["dt"][t], inp["A"], inp["B"][t], inp["C"][t], state=state, slots=slots,
            D=inp["D"], z=inp["z"][t], dt_bias=inp["dt_bias"], dt_softplus=True, out=out[t])

    ms = _timed_steps(steps, step)
    # Read and write the whole state of every row, every step.
    state_bytes = steps * batch * 2 * H * P * N * _bytes_of(state.dtype)
    return RunResult("mamba2_state_update", steps, 0, ms, out.double(), state[slots.long()].double(), state_bytes, 0.0)


def _mamba2_replay(geom, inp, steps, batch, slots, num_slots, hist_capacity, route) -> RunResult:
    H, P, N, G = geom.H, geom.P, geom.N, geom.G
    act = inp["x"].dtype
    cursors = Cursors(num_slots, hist_capacity=hist_capacity, max_tokens=1)
    cache = Mamba2Cache.allocate(num_slots, H, P, N, G, ring_len=cursors.ring_len, act_dtype=act,
                                 state_dtype=torch.float32)
    cache.state[slots.long()] = inp["state0"]
    out = torch.empty_like(inp["x"])
    accepted = torch.ones(batch, dtype=torch.int32)
    state_elems = H * P * N * _bytes_of(cache.state.dtype)
    entry_bytes = (H * P + G * N) * _bytes_of(act) + H * 4  # one ring entry: x, B (act), dt (fp32)
    traffic = {"state": 0.0, "ring": 0.0, "flush_rows": 0}

    def step(t):
        # Analytic traffic of this step, from the cursors the kernel reads: every row reads its
        # checkpoint and its `hist` ring entries and writes one entry; flush rows also write the
        # folded checkpoint.
        hist = cursors.hist[slots.long()]
        flush = cursors.flush[slots.long()].bool()
        traffic["flush_rows"] += int(flush.sum())
        traffic["state"] += state_elems * (batch + int(flush.sum()))
        traffic["ring"] += entry_bytes * (int(hist.sum()) + batch)
        replayssm_ext.mamba2_decode(
            inp["x"][t], inp["dt"][t], inp["A"], inp["B"][t], inp["C"][t], slots=slots, cache=cache, cursors=cursors,
            D=inp["D"], z=inp["z"][t], dt_bias=inp["dt_bias"], dt_softplus=True, out=out[t], route=route)
        cursors.commit(slots, accepted)

    ms = _timed_steps(steps, step)
    # Fold what is left in the rings (not part of the timed steps) to compare the full state.
    replayssm_ext.mamba2_flush(inp["A"], slots=slots, cache=cache, cursors=cursors)
    cursors.reset(slots)
    return RunResult(f"mamba2_decode[{route}]", steps, traffic["flush_rows"], ms, out.double(),
                     cache.state[slots.long()].double(), traffic["state"], traffic["ring"])


# --------------------------------------------------------------------------------------------
# Gated DeltaNet
# --------------------------------------------------------------------------------------------

def _gdn_inputs(geom: GDNGeometry, steps: int, batch: int, act: torch.dtype, gen: torch.Generator) -> dict:
    H, HV, K, V = geom.H, geom.HV, geom.K, geom.V

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen)).to(act)

    return dict(
        q=randn(steps, batch, H, K), k=randn(steps, batch, H, K), v=randn(steps, batch, HV, V),
        a=randn(steps, batch, HV), b=randn(steps, batch, HV),
        A_log=torch.empty(HV).uniform_(0.0, math.log(16.0), generator=gen),
        dt_bias=torch.empty(HV).uniform_(-3.0, -1.0, generator=gen),
        scale=K ** -0.5, state0=0.1 * torch.randn(batch, HV, V, K, generator=gen),
    )


def _gdn_truth(inp: dict, batch: int):
    return _per_row_truth(batch, lambda r: reference.gdn_recurrence(
        inp["q"][:, r], inp["k"][:, r], inp["v"][:, r], inp["a"][:, r], inp["b"][:, r], inp["A_log"],
        inp["dt_bias"], inp["scale"], True, state=inp["state0"][r], dtype=torch.float64))


def _gdn_classic(geom, inp, steps, batch, slots, num_slots) -> RunResult:
    HV, K, V = geom.HV, geom.K, geom.V
    state = torch.zeros(num_slots, HV, V, K)
    state[slots.long()] = inp["state0"]
    out = torch.empty_like(inp["v"])

    def step(t):
        replayssm_ext.gdn_state_update(
            inp["q"][t], inp["k"][t], inp["v"][t], inp["a"][t], inp["b"][t], inp["A_log"], state=state, slots=slots,
            dt_bias=inp["dt_bias"], scale=inp["scale"], qk_l2norm=True, out=out[t])

    ms = _timed_steps(steps, step)
    state_bytes = steps * batch * 2 * HV * V * K * _bytes_of(state.dtype)
    return RunResult("gdn_state_update", steps, 0, ms, out.double(), state[slots.long()].double(), state_bytes, 0.0)


def _gdn_replay(geom, inp, steps, batch, slots, num_slots, hist_capacity) -> RunResult:
    H, HV, K, V = geom.H, geom.HV, geom.K, geom.V
    act = inp["v"].dtype
    cursors = Cursors(num_slots, hist_capacity=hist_capacity, max_tokens=1)
    cache = GDNCache.allocate(num_slots, H, HV, K, V, ring_len=cursors.ring_len, act_dtype=act,
                              state_dtype=torch.float32)
    cache.state[slots.long()] = inp["state0"]
    out = torch.empty_like(inp["v"])
    accepted = torch.ones(batch, dtype=torch.int32)
    state_elems = HV * V * K * _bytes_of(cache.state.dtype)
    entry_bytes = (HV * V + H * K) * _bytes_of(act) + HV * 4  # one ring entry: u, k̂ (act), g (fp32)
    traffic = {"state": 0.0, "ring": 0.0, "flush_rows": 0}

    def step(t):
        hist = cursors.hist[slots.long()]
        flush = cursors.flush[slots.long()].bool()
        traffic["flush_rows"] += int(flush.sum())
        traffic["state"] += state_elems * (batch + int(flush.sum()))
        traffic["ring"] += entry_bytes * (int(hist.sum()) + batch)
        replayssm_ext.gdn_decode(
            inp["q"][t], inp["k"][t], inp["v"][t], inp["a"][t], inp["b"][t], inp["A_log"], slots=slots, cache=cache,
            cursors=cursors, dt_bias=inp["dt_bias"], scale=inp["scale"], qk_l2norm=True, out=out[t])
        cursors.commit(slots, accepted)

    ms = _timed_steps(steps, step)
    replayssm_ext.gdn_flush(slots=slots, cache=cache, cursors=cursors)
    cursors.reset(slots)
    return RunResult("gdn_decode", steps, traffic["flush_rows"], ms, out.double(),
                     cache.state[slots.long()].double(), traffic["state"], traffic["ring"])


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def _report(title: str, results: List[RunResult], y_true: torch.Tensor, state_true: torch.Tensor) -> bool:
    """Prints one table (the first result is the classic baseline); True when every replay run
    stays within 2x the baseline's error against the float64 truth plus ERROR_FLOOR."""
    base = results[0]
    print(f"\n{title}")
    header = (f"{'op':<32} {'steps':>5} {'flush rows':>10} {'ms/step':>9} {'max|y-y64|':>11} {'max|S-S64|':>11} "
              f"{'state MB/step':>13} {'ring MB/step':>12} {'max|y-y_classic|':>16}")
    print(header)
    print("-" * len(header))
    ok = True
    base_y_err = (base.y - y_true).abs().max().item()
    base_s_err = (base.final_state - state_true).abs().max().item()
    for r in results:
        y_err = (r.y - y_true).abs().max().item()
        s_err = (r.final_state - state_true).abs().max().item()
        agree = (r.y - base.y).abs().max().item()
        mark = ""
        if r is not base and (y_err > 2 * base_y_err + ERROR_FLOOR or s_err > 2 * base_s_err + ERROR_FLOOR
                              or not math.isfinite(y_err) or not math.isfinite(s_err)):
            ok, mark = False, "  <-- exceeds 2x classic error + floor"
        print(f"{r.op:<32} {r.steps:>5} {r.flush_rows:>10} {r.ms_per_step:>9.2f} {y_err:>11.2e} {s_err:>11.2e} "
              f"{r.state_bytes / r.steps / 1e6:>13.2f} {r.ring_bytes / r.steps / 1e6:>12.3f} {agree:>16.2e}{mark}")
    return ok


def _run_cpu(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    act = DTYPES[args.act_dtype]
    batch, steps, B = args.batch, args.steps, args.hist_capacity
    # Rows use scattered slots of a larger cache (slot indexing is part of what is compared).
    num_slots = 2 * batch + 1
    slots = torch.randperm(num_slots, generator=gen)[:batch].to(torch.int32)
    print(f"replayssm CPU comparison (torch {torch.__version__}, {torch.get_num_threads()} threads): batch={batch}, "
          f"steps={steps}, B={B}, T=1, act={args.act_dtype}, checkpoint fp32. The CPU ops run the Python reference "
          f"of the replay formulation: wall times are not GPU speed; MB/step are the analytic HBM bytes a kernel "
          f"moves (ring: entries read + the one written).")
    ok = True
    if args.family in ("mamba2", "all"):
        base = NEMOTRON3_NANO_4B
        geom = Mamba2Geometry(nheads=args.mamba2_heads, headdim=base.headdim, dstate=base.dstate, ngroups=base.ngroups)
        scaled = "" if geom == base else f", heads scaled {base.nheads} -> {geom.nheads}"
        inp = _mamba2_inputs(geom, steps, batch, act, gen)
        y_true, s_true = _mamba2_truth(inp, batch)
        results = [_mamba2_classic(geom, inp, steps, batch, slots, num_slots)]
        for route in ("output_only", "state_and_output"):
            results.append(_mamba2_replay(geom, inp, steps, batch, slots, num_slots, B, route))
        ok &= _report(f"Mamba-2, Nemotron-3-Nano-4B geometry (H, P, N, G) = ({geom.H}, {geom.P}, {geom.N}, "
                      f"{geom.G}){scaled}", results, y_true, s_true)
    if args.family in ("gdn", "all"):
        geom = QWEN35_4B
        inp = _gdn_inputs(geom, steps, batch, act, gen)
        y_true, s_true = _gdn_truth(inp, batch)
        results = [_gdn_classic(geom, inp, steps, batch, slots, num_slots),
                   _gdn_replay(geom, inp, steps, batch, slots, num_slots, B)]
        ok &= _report(f"Gated DeltaNet, Qwen3.5-4B geometry (H, HV, K, V) = ({geom.H}, {geom.HV}, {geom.K}, {geom.V})",
                      results, y_true, s_true)
    print("\nmax|y-y64|, max|S-S64|: largest error of the outputs / the final (folded) state against the float64 "
          "sequential recurrence; max|y-y_classic|: replay vs the classic step.")
    print("result: " + ("OK (replay within 2x the classic step's error + floor)" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--cpu" not in argv:
        if torch.cuda.is_available() and replayssm_ext.HAS_CUDA_KERNELS:
            from replayssm_ext import benchmark  # noqa: PLC0415  (needs the GPU; imported only here)
            return benchmark.main(argv)
        reason = ("no CUDA device" if not torch.cuda.is_available()
                  else "the extension was built without the CUDA kernels")
        print(f"replayssm: {reason}: running the CPU comparison instead of the GPU benchmark")
    return _run_cpu(_parse_cpu_args(argv))


if __name__ == "__main__":
    sys.exit(main())
