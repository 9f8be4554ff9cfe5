"""Build of replayssm_ext._C: the CUDA extension when a CUDA build of torch and nvcc are present,
a CPU-only extension otherwise (the package always imports and the ops always run on the CPU).

Environment:
  TORCH_CUDA_ARCH_LIST   CUDA targets (default "9.0a;10.0a": sm_90a and sm_100a cubins)
  REPLAYSSM_CPU_ONLY=1   build without CUDA even where it is available
  REPLAYSSM_CUTLASS_DIR  a CUTLASS include dir (holding cutlass/ and cute/) instead of the
                         nvidia-cutlass wheel's
  REPLAYSSM_PTXAS_VERBOSE=1  print ptxas register / spill reports
  REPLAYSSM_FAMILIES     comma list of kernel families to build (e.g. "mamba2"); default all.
                         Sources are named <family>_*.cu / <family>_*.cpp; the cursor ops are always
                         built. A family left out keeps its CPU ops only (a development shortcut).
  MAX_JOBS               parallel compile jobs (ninja)
"""

import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
TORCH_TARGET_VERSION = "0x020b000000000000"  # torch 2.11: the GPU machine's torch, loads on newer too


def _real_cuda_home():
    """The toolkit root nvcc really uses (nvcc on PATH may be a wrapper script, which misleads torch)."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "-dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (out.stdout + out.stderr).splitlines():
        m = re.search(r"TOP=(\S+)", line)
        if m and os.path.isfile(os.path.join(m.group(1), "bin", "nvcc")):
            return os.path.realpath(m.group(1))
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


def _want_cuda():
    if os.environ.get("REPLAYSSM_CPU_ONLY") == "1":
        return False
    import torch  # noqa: E402  (after CUDA_HOME is set)
    return torch.version.cuda is not None and os.environ.get("CUDA_HOME") is not None


def _cutlass_include():
    override = os.environ.get("REPLAYSSM_CUTLASS_DIR")
    if override:
        if not os.path.isdir(os.path.join(override, "cute")):
            sys.exit(f"REPLAYSSM_CUTLASS_DIR={override} holds no cute/ directory")
        return override
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        return None
    inc = os.path.join(os.path.dirname(spec.origin), "source", "include")
    return inc if os.path.isdir(os.path.join(inc, "cute")) else None


def _needs_cutlass(sources):
    pattern = re.compile(r'#\s*include\s*[<"](cute|cutlass)/')
    headers = glob.glob(os.path.join(ROOT, "csrc", "include", "**", "*.*"), recursive=True)
    for path in list(sources) + headers:
        with open(path, encoding="utf-8") as f:
            if pattern.search(f.read()):
                return True
    return False


cuda_home = _real_cuda_home()
if cuda_home and os.environ.get("REPLAYSSM_CPU_ONLY") != "1":
    os.environ["CUDA_HOME"] = cuda_home  # must precede torch.utils.cpp_extension's import

from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402



def _family_filter(paths):
    wanted = os.environ.get("REPLAYSSM_FAMILIES")
    if not wanted:
        return paths
    families = [f.strip() for f in wanted.split(",") if f.strip()]
    known = ("mamba2_", "gdn_")
    keep = []
    for p in paths:
        name = os.path.basename(p)
        if not name.startswith(known) or any(name.startswith(f + "_") for f in families):
            keep.append(p)
    return keep


with_cuda = _want_cuda()
cpp_sources = _family_filter(sorted(glob.glob("csrc/bindings.cpp") + glob.glob("csrc/ops/*.cpp")))
cu_sources = _family_filter(sorted(glob.glob("csrc/kernels/*.cu"))) if with_cuda else []
include_dirs = [os.path.join(ROOT, "csrc", "include"), os.path.join(ROOT, "csrc", "ops")]

defines = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]  # torch adds -DPy_LIMITED_API itself
cxx_flags = ["-O3", "-std=c++20", "-g0", "-fvisibility=hidden"] + defines
nvcc_flags = ["-O3", "-std=c++20", "--expt-relaxed-constexpr", "-lineinfo", "-Xcompiler", "-g0"]

if with_cuda:
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a;10.0a")
    cxx_flags += ["-DREPLAYSSM_WITH_CUDA", "-DUSE_CUDA"]
    if os.environ.get("REPLAYSSM_PTXAS_VERBOSE") == "1":
        nvcc_flags += ["-Xptxas", "-v"]
    if _needs_cutlass(cu_sources):
        cutlass = _cutlass_include()
        if cutlass is None:
            sys.exit("replayssm needs the CUTLASS/CuTe headers: pip install --no-deps nvidia-cutlass==4.2.0.0, "
                     "or point REPLAYSSM_CUTLASS_DIR at a CUTLASS include directory")
        include_dirs.append(cutlass)
    ext = CUDAExtension(
        "replayssm_ext._C",
        cpp_sources + cu_sources,
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        py_limited_api=True,
    )
else:
    ext = CppExtension(
        "replayssm_ext._C",
        cpp_sources,
        include_dirs=include_dirs,
        extra_compile_args={"cxx": cxx_flags},
        py_limited_api=True,
    )


def _touch_sources_changed_since_last_build(build_temp):
    """Ninja recompiles what is older than its sources by modification time. A GPU machine keeps
    build outputs between calls but receives each call's working tree with this machine's times,
    so a source put back to earlier content (a patch applied in one call, absent in the next) can
    be older than the object built from the patched one and not be recompiled: session 63 profiled
    a patch's kernels for main's that way. So every file under csrc/ whose content differs from
    the one the last build saw gets the current time (all of them where a build folder exists
    without a record), and the record is rewritten."""
    record = os.path.join(ROOT, "build", "csrc-digests.json")
    digests = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "csrc", "**", "*"), recursive=True)):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digests[os.path.relpath(path, ROOT)] = hashlib.sha1(f.read()).hexdigest()
    try:
        with open(record) as f:
            previous = json.load(f)
    except (OSError, ValueError):
        previous = {} if os.path.isdir(build_temp) else None
    if previous is not None:
        for rel, digest in digests.items():
            if previous.get(rel) != digest:
                os.utime(os.path.join(ROOT, rel))
    os.makedirs(os.path.dirname(record), exist_ok=True)
    with open(record, "w") as f:
        json.dump(digests, f)


class BuildExtInTree(BuildExtension):
    """Compiles into build/temp.<platform>-<python> under the source tree, whatever folder the caller
    picked. An editable install (PEP 660) runs build_ext in a throw-away folder, so without this it
    recompiled every kernel even right after `setup.py build_ext --inplace`; with it, ninja finds
    the objects of the previous build and recompiles only what changed."""

    def finalize_options(self):
        super().finalize_options()
        tag = f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
        self.build_temp = os.path.join(ROOT, "build", tag)

    def run(self):
        _touch_sources_changed_since_last_build(self.build_temp)
        super().run()


print(f"replayssm: building the {'CUDA (' + os.environ['TORCH_CUDA_ARCH_LIST'] + ')' if with_cuda else 'CPU-only'} "
      f"extension", file=sys.stderr)

setup(
    name="replayssm_ext",
    version="0.1.0",
    description="ReplaySSM decoding for Mamba-2 and Gated DeltaNet: CUDA kernels as PyTorch custom ops",
    packages=["replayssm_ext"],
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExtInTree},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    python_requires=">=3.10",
    install_requires=["torch>=2.11", "numpy"],
    extras_require={"test": ["pytest"], "plot": ["matplotlib"]},
    entry_points={"console_scripts": ["replayssm-bench=replayssm_ext.__main__:main"]},
)
