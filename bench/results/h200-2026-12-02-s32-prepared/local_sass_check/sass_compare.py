"""Per-kernel SASS comparison of two cubins (session 32, run here on the CPU machine).

usage: python3 sass_compare.py A.cubin B.cubin
Prints one line per kernel: SAME (identical instruction text), ADDR (identical once branch and call
targets are masked) or DIFFn (n differing lines after masking), then both instruction counts and the
kernel's template arguments. cuobjdump comes from triton's bundled CUDA tools (CUOBJDUMP overrides).
"""
import difflib
import os
import re
import subprocess
import sys

CUOBJDUMP = os.environ.get(
    "CUOBJDUMP", "/work/venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/cuobjdump")


def kernels(cubin):
    out = subprocess.run([CUOBJDUMP, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    found, name = {}, None
    for line in out.splitlines():
        if "Function :" in line:
            name = line.split("Function :")[1].strip()
            found[name] = []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,5}\*/\s+(.*?)\s*;", line)
        if name and m:
            found[name].append(m.group(1))
    return found


def masked(lines):
    return [re.sub(r"0x[0-9a-f]+", "X", x) for x in lines]


a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
for name in sorted(a):
    other = b.get(name, [])
    if a[name] == other:
        tag = "SAME"
    elif masked(a[name]) == masked(other):
        tag = "ADDR"
    else:
        diff = difflib.unified_diff(masked(a[name]), masked(other), lineterm="", n=0)
        tag = f"DIFF{sum(1 for l in diff if l[:1] in '+-' and l[:3] not in ('+++', '---'))}"
    demangled = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    print(tag, len(a[name]), len(other), demangled.split("<", 1)[-1][:110])
