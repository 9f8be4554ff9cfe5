#!/usr/bin/env python
"""One op at fixed cursors, repeated: the process to put under Nsight Compute or Nsight Systems.

Every row sits at the same phase (history length --hist, flush flag --flush), so a profiled launch
is a pure non-flush or a pure flush step of the kernel named by --op. From the repository root:

    ncu --set full -k regex:window_kernel --launch-skip 3 --launch-count 1 \
        python bench/profile_step.py --op gdn_spec_verify --geometry qwen3.5-4b --T 4 --hist 8
    nsys profile python bench/profile_step.py --op mamba2_decode --geometry nemotron3-nano-4b --hist 15

Ops: mamba2_decode (--route), mamba2_spec_verify, mamba2_state_update, gdn_decode, gdn_spec_verify,
gdn_state_update. It prints the median time per launch from CUDA events (not a benchmark: no
graphs, no L2 flushing; replayssm_ext.benchmark is that).

--sms N launches every step on N of the device's SMs (the benchmark's SmPartition, a CUDA green
context's stream), so Nsight Compute profiles a kernel where each SM has an H200's share of the
DRAM bandwidth or less (an H100 on 80-96 of its 132 SMs; docs/perf-notes.md, "Method notes",
session 57). The launchers still see the whole device, as in the benchmark's --sms runs.

--trace N captures N steps in one CUDA graph, replays it under torch.profiler (CUPTI) and prints,
over the steps after the first of each replay, each kernel's duration, the interval between
consecutive steps' starts and the gap from one step's last kernel to the next step's first. The
same is printed for a graph of N one-element adds: the floor of a dependent launch in a graph on
this machine. A step restores the three cursor tensors before the op (three small copies, which
the graph runs as `memcpy32_post` kernels of ~0.9 us each on the H200), so consecutive op
kernels never overlap here as they do in the benchmark's replays under programmatic dependent
launch: the op kernel's duration is its body run alone, which splits a small batch's time per
launch into kernel body and launch gap where Nsight Systems is not installed (session 25: the nano
non-flush step at batch 1 traced 8.7 us start to start, 5.7 us of it the op kernel, against 5.9
us per launch in the benchmark).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root holds the package

import torch  # noqa: E402

from replayssm_ext import benchmark as bm  # noqa: E402

OPS = ("mamba2_decode", "mamba2_spec_verify", "mamba2_state_update", "gdn_decode", "gdn_spec_verify",
       "gdn_state_update")


def trace_graph(label: str, fn, launches: int, replays: int, stream=None) -> str:
    """Body and gap of `launches` calls of fn captured in one CUDA graph (see --trace). stream: where
    the graph is captured (an SM partition's stream, replayed there too: the current stream); None:
    a side stream of its own."""
    side = stream or torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(launches):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
            torch.cuda.synchronize()  # replays apart, so each one's first launch starts cold
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    kernels = sorted((float(e["ts"]), float(e["dur"]), e["name"]) for e in events
                     if e.get("ph") == "X" and e.get("cat") == "kernel")
    per_launch, rem = divmod(len(kernels), launches * replays)
    if per_launch == 0 or rem:
        return f"{label}: the trace holds {len(kernels)} kernels, not a multiple of {launches} x {replays} (no split)"
    # A launch of fn may run several kernels (the op's and any it starts): each launch is
    # per_launch consecutive kernels, timed from its first kernel's start to the next launch's.
    med = statistics.median
    lines = [f"{label}: {launches} launches per graph, {replays} replays, {per_launch} kernel(s) per launch"]
    names = {}
    start_to_start, gap = [], []
    for r in range(replays):
        one = kernels[r * launches * per_launch:(r + 1) * launches * per_launch]
        steps = [one[i * per_launch:(i + 1) * per_launch] for i in range(launches)]
        for prev, cur in zip(steps, steps[1:]):
            start_to_start.append(cur[0][0] - prev[0][0])
            gap.append(cur[0][0] - max(t + d for t, d, _ in prev))
            for k, (t, d, name) in enumerate(cur):
                names.setdefault((k, name[:160]), []).append(d)
    for (k, name), durs in sorted(names.items()):
        lines.append(f"  kernel {k} duration median {med(durs):.2f} us (min {min(durs):.2f}, max {max(durs):.2f}, "
                     f"{len(durs)} samples): {name}")
    lines.append(f"  launch start to next launch start median {med(start_to_start):.2f} us; "
                 f"last kernel end to next launch start median {med(gap):.2f} us")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", choices=OPS, required=True)
    ap.add_argument("--geometry", default=None, help="a benchmark geometry name (default: the family's first)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("-B", "--hist-capacity", type=int, default=16)
    ap.add_argument("--T", type=int, default=1, help="tokens per row (spec verify)")
    ap.add_argument("--hist", type=int, default=8, help="history length of every row")
    ap.add_argument("--flush", action="store_true", help="every row flushes")
    ap.add_argument("--route", default="output_only", choices=("output_only", "state_and_output"))
    ap.add_argument("--state-dtype", default="fp32", choices=sorted(bm.DTYPES))
    ap.add_argument("--act-dtype", default="bf16", choices=sorted(bm.DTYPES))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--trace", type=int, default=0, metavar="N",
                    help="N launches in one CUDA graph, traced with torch.profiler (0: off)")
    ap.add_argument("--sms", type=int, default=0, metavar="N",
                    help="run every step on N of the device's SMs (a green context; 0: all)")
    args = ap.parse_args(argv)

    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    m2 = args.op.startswith("mamba2")
    geoms = bm.MAMBA2_GEOMETRIES if m2 else bm.GDN_GEOMETRIES
    geom = next((g for g in geoms if args.geometry in (None, g.name)), None)
    if geom is None:
        ap.error(f"--geometry must be one of {[g.name for g in geoms]} for {args.op}, got {args.geometry!r}")
    T = args.T
    R = args.hist_capacity + T
    if not 0 <= args.hist <= R - T:
        ap.error(f"--hist must be in [0, {R - T}] (R = B + T = {R}), got {args.hist}")
    dev = torch.device("cuda", torch.cuda.current_device())
    part = bm.SmPartition.create(dev, args.sms) if args.sms else None
    gen = torch.Generator(device=dev).manual_seed(0)
    fam = (bm.Mamba2Family if m2 else bm.GDNFamily)(geom, bm.DTYPES[args.state_dtype], bm.DTYPES[args.act_dtype],
                                                    dev, gen)
    batch = args.batch
    params = fam.make_params()
    state = fam.make_state(batch)
    rings = fam.make_rings(batch, R, params)
    slots = torch.arange(batch, dtype=torch.int32, device=dev)
    cur = bm.Cursors.empty(batch, dev)
    cur.hist.fill_(args.hist)
    cur.flush.fill_(1 if args.flush else 0)
    spec = args.op.endswith("spec_verify")
    inp = fam.make_inputs(batch * T if spec else batch)
    out = fam.make_out(batch * T if spec else batch)
    cu = torch.arange(0, batch * T + 1, T, dtype=torch.int32, device=dev)
    base = args.op.endswith("state_update")
    pristine = cur.clone()

    def step():
        cur.copy_(pristine)  # the op reads the cursors only; restoring keeps every launch at one phase
        if base:
            fam.state_update(inp, params, state, slots, out)
        elif spec:
            fam.spec_verify(inp, params, state, rings, cu, slots, cur, out, T)
        elif m2:
            fam.decode(inp, params, state, rings, slots, cur, out, route=args.route)
        else:
            fam.decode(inp, params, state, rings, slots, cur, out)

    if part is not None:
        # Everything from here on, capture and replays included, runs on the partition's stream.
        part.stream.wait_stream(torch.cuda.current_stream(dev))
        torch.cuda.set_stream(part.stream)
        print(f"on {part.num_sms} of {part.device_sms} SMs (green context)")

    if args.trace > 0:
        if args.trace < 2:
            ap.error(f"--trace needs at least 2 launches per graph, got {args.trace}")
        # Each traced step is step(): the cursor restore and the op, as in the eager timing below.
        label = f"{args.op} {geom.name} batch={batch} T={T} hist={args.hist} flush={int(args.flush)}"
        step()
        one = torch.zeros(1, device=dev)
        for name, fn in ((label, step), ("one-element add (the graph's launch floor)", lambda: one.add_(1.0))):
            print(trace_graph(name, fn, args.trace, args.iters, part.stream if part else None))
        return 0

    times = []
    for _ in range(args.iters):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        step()
        t1.record()
        torch.cuda.synchronize()
        times.append(t0.elapsed_time(t1) * 1e3)
    times.sort()
    print(f"{args.op} {geom.name} batch={batch} B={args.hist_capacity} T={T} hist={args.hist} "
          f"flush={int(args.flush)}: median {times[len(times) // 2]:.1f} us per launch (events, eager)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
