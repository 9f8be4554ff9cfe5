#!/usr/bin/env python3
"""Whether two source trees compile to the same kernels: every csrc/kernels/*.cu of each tree to a
cubin (nvcc with setup.py's device flags, one architecture), then each kernel's SASS compared
across the trees, whatever file it lands in. For changes meant to leave the device code alone
(host-side dispatch, how instantiations are spread over compile units): "same SASS" is checked
here on the CPU machine instead of spending GPU time on it.

    python3 scripts/sass_compare.py OLD_TREE NEW_TREE [--arch sm_90a] [--jobs 2] [--work DIR]

A tree is a folder holding csrc/ (a checkout, or `git archive REV | tar -x -C DIR`). Before
comparing, each instruction drops its address, encoding and spacing; branch labels are numbered
per kernel and compiler-internal helpers lose their module-wide number (both depend on what else
the compile unit holds); anonymous-namespace names lose their per-file hash. Registers and
instruction order are compared as they are: a different allocation counts as different code.
Kernels that differ are compared again with their registers renamed in order of first use: nvcc
13.0 itself is not deterministic here (three compiles of one Mamba-2 spec unit in session 46: two
of its 48 kernels came out with other register numbers in a cold tail), so a difference that
vanishes under the renaming is reported apart from one that does not. Exit status 0 when every
kernel is the same in both trees up to that renaming, 1 otherwise.

nvdisasm comes from PATH, $CUDA_HOME/bin or the nvidia-cuda-nvdisasm wheel
(`pip download --no-deps nvidia-cuda-nvdisasm`, unzip; point --nvdisasm at it).
"""

import argparse
import collections
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys

# setup.py's nvcc flags, plus the half / bfloat16 operator switches torch's CUDAExtension adds.
NVCC_FLAGS = ["-O3", "-std=c++20", "--expt-relaxed-constexpr", "-lineinfo",
              "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def find_nvdisasm(given):
    candidates = [given, shutil.which("nvdisasm")]
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvdisasm"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit("sass_compare.py: no nvdisasm (PATH, $CUDA_HOME/bin or --nvdisasm)")


def compile_tree(tree, out_dir, arch, jobs):
    """csrc/kernels/*.cu of `tree` -> out_dir/<name>.cubin; returns the cubin paths."""
    os.makedirs(out_dir, exist_ok=True)
    sources = sorted(glob.glob(os.path.join(tree, "csrc", "kernels", "*.cu")))
    if not sources:
        sys.exit(f"sass_compare.py: no csrc/kernels/*.cu under {tree}")
    include = os.path.join(tree, "csrc", "include")

    def one(src):
        cubin = os.path.join(out_dir, os.path.basename(src)[:-3] + ".cubin")
        cmd = ["nvcc", "-cubin", f"-arch={arch}", "-I", include, *NVCC_FLAGS, "-o", cubin, src]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"sass_compare.py: compiling {src} failed:\n{done.stderr[-3000:]}")
        return cubin

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, sources))


def kernels(nvdisasm, cubin):
    """{kernel name: [normalized instruction, ...]} of one cubin."""
    text = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    found, name = {}, None
    for line in text.splitlines():
        head = re.match(r"^\.text\.(\S+):", line)
        if head:
            name = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__", head.group(1))
            found[name] = []
        elif name and re.match(r"^\s+/\*[0-9a-f]{4,}\*/", line):
            found[name].append(" ".join(re.sub(r"/\*[0-9a-f]+\*/", "", line.split(";")[0]).split()))
        elif name and re.match(r"^\s*\.L_x_\d+:", line):
            found[name].append("label")
    for name, body in found.items():
        labels = {}
        renumber = lambda m: labels.setdefault(m.group(0), f"L{len(labels)}")  # noqa: E731
        found[name] = [re.sub(r"\$__internal_\d+_", "$__internal_", re.sub(r"\.L_x_\d+", renumber, ins)) for ins in body]
    return found


def renamed_registers(body):
    """The instructions with every register named by its order of first use (per register file)."""
    names, counts = {}, collections.Counter()

    def rename(m):
        if m.group(0) not in names:
            names[m.group(0)] = f"{m.group(1)}#{counts[m.group(1)]}"
            counts[m.group(1)] += 1
        return names[m.group(0)]

    return [re.sub(r"\b(UR|R|UP|P|B)\d+\b", rename, ins) for ins in body]


def tree_kernels(nvdisasm, cubins):
    """{kernel: (instructions, cubin)}; a kernel compiled into two units of one tree is an error."""
    all_kernels = {}
    for cubin in cubins:
        for name, body in kernels(nvdisasm, cubin).items():
            if name in all_kernels:
                sys.exit(f"sass_compare.py: {name} is in both {all_kernels[name][1]} and {cubin}")
            all_kernels[name] = (body, cubin)
    return all_kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_tree")
    ap.add_argument("new_tree")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--work", default="/tmp/replayssm_sass_compare", help="where the cubins go")
    ap.add_argument("--nvdisasm")
    ap.add_argument("--reuse", action="store_true", help="compare the cubins already in --work instead of compiling")
    args = ap.parse_args()
    nvdisasm = find_nvdisasm(args.nvdisasm)
    sides = {}
    for label, tree in (("old", args.old_tree), ("new", args.new_tree)):
        out_dir = os.path.join(args.work, label)
        cubins = (sorted(glob.glob(os.path.join(out_dir, "*.cubin"))) if args.reuse
                  else compile_tree(tree, out_dir, args.arch, args.jobs))
        sides[label] = tree_kernels(nvdisasm, cubins)
        print(f"{label}: {len(cubins)} compile units, {len(sides[label])} kernels, "
              f"{sum(len(b) for b, _ in sides[label].values())} instructions ({tree})")
    old, new = sides["old"], sides["new"]
    only_old, only_new = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    differ = sorted(k for k in set(old) & set(new) if old[k][0] != new[k][0])
    for title, names in (("only in old", only_old), ("only in new", only_new)):
        if names:
            print(f"{title}: {len(names)}, e.g. {names[:3]}")
    renamed = [k for k in differ if renamed_registers(old[k][0]) == renamed_registers(new[k][0])]
    code = [k for k in differ if k not in renamed]
    for title, names in (("other register numbers only", renamed), ("different code", code)):
        if names:
            by_unit = collections.Counter(os.path.basename(old[k][1]) for k in names)
            print(f"{title}: {len(names)} kernels, by old compile unit: {dict(by_unit)}")
            print(f"  e.g. {names[0]}")
    same = not (only_old or only_new or code)
    verdict = ("every kernel has the same SASS in both trees" if not differ else
               f"every kernel has the same SASS up to register numbers ({len(renamed)} renumbered)" if same else
               "the trees differ")
    print(f"{args.arch}: {verdict}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
