#!/usr/bin/env python
"""Where a kernel's warps stall, by stretch of SASS: the table behind docs/perf-notes.md's
"N % of the stall samples sat in ..." statements.

Input: the per-instruction source page of an Nsight Compute report, exported as CSV:

    ncu --section SourceCounters --section WarpStateStats -k regex:window_kernel --launch-skip 3 \
        --launch-count 1 -o rep python bench/profile_step.py --op gdn_spec_verify --T 4 --hist 8
    ncu --import rep.ncu-rep --page source --csv --print-source sass > rep.csv
    python bench/ncu_hotspots.py rep.csv --window 80 --top 10 --show 1

It cuts the SASS listing into windows of --window consecutive instructions and prints the windows
with the most warp-stall samples: their share of all samples and of executed instructions, and the
three stall reasons that took most of their samples. --show K prints the instructions of the K
hottest windows with their samples and execution counts, to map them back to the source.
"""
import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
SOURCE = "Source"


def _num(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


def read_source_page(path):
    """(kernel name, header, rows) of an `ncu --page source --csv` export: its first line names
    the kernel, the second is the header, one row per instruction follows."""
    with open(path, newline="") as f:
        lines = list(csv.reader(f))
    if len(lines) < 2:
        raise ValueError(f"{path}: expected a kernel line and a header line, got {len(lines)} line(s)")
    kernel = lines[0][1] if len(lines[0]) > 1 else ""
    header = lines[1]
    missing = [c for c in (SOURCE, SAMPLES, EXECUTED) if c not in header]
    if missing:
        raise ValueError(f"{path}: columns {missing} not in the header (export the source page with "
                         f"--print-source sass from a report with SourceCounters and WarpStateStats)")
    return kernel, header, [r for r in lines[2:] if len(r) == len(header)]


def hot_windows(header, rows, window):
    """Windows of `window` consecutive instructions, hottest first: dicts with start, samples and
    instruction shares (fractions of the kernel's totals) and the top stall reasons."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    col = {name: i for i, name in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    total_samples = sum(_num(r[col[SAMPLES]]) for r in rows) or 1.0
    total_executed = sum(_num(r[col[EXECUTED]]) for r in rows) or 1.0
    out = []
    for start in range(0, len(rows), window):
        part = rows[start:start + window]
        samples = sum(_num(r[col[SAMPLES]]) for r in part)
        by_reason = {h[len("stall_"):]: sum(_num(r[col[h]]) for r in part) for h in stalls}
        top = sorted(by_reason.items(), key=lambda kv: -kv[1])[:3]
        out.append({
            "start": start,
            "end": start + len(part),
            "samples": samples / total_samples,
            "executed": sum(_num(r[col[EXECUTED]]) for r in part) / total_executed,
            "reasons": [(name, value / samples if samples else 0.0) for name, value in top if value > 0],
        })
    out.sort(key=lambda w: -w["samples"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="an `ncu --page source --csv --print-source sass` export")
    ap.add_argument("--window", type=int, default=80, help="instructions per window (default 80)")
    ap.add_argument("--top", type=int, default=10, help="windows to list (default 10)")
    ap.add_argument("--show", type=int, default=0, help="print the instructions of the K hottest windows")
    args = ap.parse_args(argv)
    try:
        kernel, header, rows = read_source_page(args.csv)
        windows = hot_windows(header, rows, args.window)
    except (OSError, ValueError) as e:
        print(f"ncu_hotspots: {e}", file=sys.stderr)
        return 2
    col = {name: i for i, name in enumerate(header)}
    print(f"{kernel}\n{len(rows)} instructions, windows of {args.window}")
    for w in windows[:args.top]:
        reasons = ", ".join(f"{name} {share:.0%}" for name, share in w["reasons"])
        print(f"  [{w['start']:5d}, {w['end']:5d})  samples {w['samples']:6.1%}  instructions "
              f"{w['executed']:6.1%}  ({reasons})")
    for w in windows[:args.show]:
        print(f"\ninstructions [{w['start']}, {w['end']}): samples, executed, SASS")
        for i in range(w["start"], w["end"]):
            r = rows[i]
            print(f"  {i:5d} {r[col[SAMPLES]]:>7} {r[col[EXECUTED]]:>10}  {r[col[SOURCE]].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
