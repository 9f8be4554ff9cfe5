#!/usr/bin/env python3
"""Global loads a kernel waits for right after issuing them, read from SASS on the CPU machine.

At batch 1 a step is a chain of memory latencies, and a load whose value is used a few instructions
after it is issued costs a whole latency there, however many loads the source meant to have in
flight together. ptxas does this where a load and its first use sit in one branch (a load converted
inside `if (i <= R)` is waited for before the branch ends) or where registers are short (loads
reusing one register). Session 54 found the warp-rows decode waiting for its B entries one by one
this way (five latencies in a row at B = 16) and its token's B at the kernel's end (four).

    python3 scripts/sass_load_waits.py OBJ_OR_CUBIN [--near 4] [--kernel REGEX] [--list]

For every kernel in the object (nvcc -c ... -gencode arch=compute_90a,code=sm_90a), the number of
global loads (`LDG`) whose destination register is read within --near instructions, against all
its global loads, most first, names demangled. --kernel keeps the kernels whose demangled name
matches; --list prints each such load's address, opcode and distance to its first use. A short
distance inside a loop that keeps other loads in flight may be harmless; one per unrolled entry of
a gather is not. `cp.async` (`LDGSTS`) has no register destination and never shows here.

cuobjdump comes from PATH, $CUDA_HOME/bin or the nvidia-cuda-cuobjdump wheel
(`pip download --no-deps nvidia-cuda-cuobjdump`, unzip; put its nvidia/cu13/bin on PATH).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LOAD = re.compile(r"^(?:@!?P\d\s+)?(LDG\S*)\s+(R\d+)")


def find_tool(name):
    """The path of a CUDA binary tool from PATH or $CUDA_HOME/bin, or None."""
    path = shutil.which(name)
    if path:
        return path
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    candidate = os.path.join(home, "bin", name)
    return candidate if os.path.exists(candidate) else None


def kernels(sass):
    """(mangled name, [(address, instruction text)]) for each function of a cuobjdump listing."""
    for chunk in re.split(r"\n\s+Function : ", sass)[1:]:
        name, body = chunk.split("\n", 1)
        yield name.strip(), [(m.group(1), m.group(2)) for m in map(INSTR.match, body.split("\n")) if m]


def load_waits(instructions, horizon=400):
    """(address, opcode, distance) for each global load: instructions until the first one that reads
    any register of its destination (None past the horizon or the function's end)."""
    out = []
    for i, (addr, text) in enumerate(instructions):
        m = LOAD.match(text)
        if not m:
            continue
        opcode, first = m.group(1), int(m.group(2)[1:])
        width = 4 if ".128" in opcode else 2 if ".64" in opcode else 1
        regs = re.compile(r"\bR(%s)\b" % "|".join(str(first + k) for k in range(width)))
        distance = None
        for j in range(i + 1, min(i + 1 + horizon, len(instructions))):
            body = re.sub(r"^@!?P\d\s+", "", instructions[j][1]).split(None, 1)
            if len(body) < 2:
                continue
            operands = body[1].split(",")
            # Stores read every operand; other instructions write their first.
            sources = operands if body[0].startswith("ST") else operands[1:]
            if regs.search(",".join(sources)):
                distance = j - i
                break
        out.append((addr, opcode, distance))
    return out


def demangle(names):
    """Demangled names, by c++filt where it exists."""
    tool = shutil.which("c++filt")
    if not tool:
        return list(names)
    result = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("object", help="an object file or cubin holding SASS")
    parser.add_argument("--near", type=int, default=4, help="a first use within this many instructions counts (default 4)")
    parser.add_argument("--kernel", default=None, help="regex on the demangled name")
    parser.add_argument("--list", action="store_true", help="print each near-use load")
    args = parser.parse_args()
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        sys.exit("sass_load_waits.py: cuobjdump not found (PATH, $CUDA_HOME/bin); see the docstring")
    sass = subprocess.run([cuobjdump, "-sass", args.object], capture_output=True, text=True, check=True).stdout
    found = list(kernels(sass))
    if not found:
        sys.exit(f"sass_load_waits.py: no SASS functions in {args.object}")
    rows = []
    for (name, instructions), pretty in zip(found, demangle([n for n, _ in found])):
        if args.kernel and not re.search(args.kernel, pretty):
            continue
        waits = load_waits(instructions)
        near = [w for w in waits if w[2] is not None and w[2] <= args.near]
        rows.append((len(near), len(waits), pretty, near))
    rows.sort(key=lambda r: (-r[0], r[2]))
    for count, total, pretty, near in rows:
        print(f"{count:4d} of {total:4d}  {pretty}")
        if args.list:
            for addr, opcode, distance in near:
                print(f"      {addr}  {opcode:<18} first use after {distance}")


if __name__ == "__main__":
    main()
