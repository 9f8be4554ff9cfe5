"""What the build produced: the op set, and (for a CUDA build) which GPU architectures the .so holds.

The expected architectures are those of TORCH_CUDA_ARCH_LIST, the variable setup.py builds for:
.ci/run exports "9.0a;10.0a", scripts/gpu_check.sh "9.0a". Where it is not set, the test cannot
know which list the build used (setup.py's default is "9.0a;10.0a", but a build may have had its
own) and skips, saying so.
"""

import glob
import importlib.util
import os
import re
import shutil
import subprocess

import pytest
import torch

import replayssm_ext

EXPECTED_OPS = {
    "commit", "reset",
    "mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "mamba2_state_update",
    "gdn_decode", "gdn_spec_verify", "gdn_flush", "gdn_state_update",
}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_op_namespace_holds_exactly_the_contract_ops():
    registered = {name.split("::", 1)[1] for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("replayssm::")}
    assert registered == EXPECTED_OPS, (
        f"missing: {sorted(EXPECTED_OPS - registered)}, unexpected: {sorted(registered - EXPECTED_OPS)}")
    for name in EXPECTED_OPS:
        assert hasattr(torch.ops.replayssm, name), f"torch.ops.replayssm.{name} is not reachable"


def _cuobjdump():
    """cuobjdump from PATH, the CUDA toolkit, or the triton wheel (which ships one); None if absent."""
    candidates = [shutil.which("cuobjdump")]
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin", "cuobjdump"))
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        candidates.append(os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "cuobjdump"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _expected_archs():
    """sm names for TORCH_CUDA_ARCH_LIST entries: "9.0a" -> "sm_90a", "10.0a" -> "sm_100a"."""
    arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if not arch_list:
        pytest.skip("TORCH_CUDA_ARCH_LIST is not set: the arch list of the build is unknown "
                    "(export the list the extension was built with, e.g. '9.0a;10.0a')")
    archs = set()
    for entry in re.split(r"[;\s]+", arch_list.strip()):
        entry = entry.replace("+PTX", "")
        if not entry:
            continue
        m = re.fullmatch(r"(\d+)\.(\d+)([af]?)", entry)
        assert m, f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not of the form 9.0a / 10.0a / 8.9"
        archs.add(f"sm_{m.group(1)}{m.group(2)}{m.group(3)}")
    return archs


def _cubins():
    """(kernel file stem, sm arch) pairs of the cubins embedded in the extension."""
    if not replayssm_ext.HAS_CUDA_KERNELS:
        pytest.skip("the extension was built CPU-only (no CUDA torch or no nvcc at build time): no cubins to check")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (PATH, $CUDA_HOME/bin, triton/backends/nvidia/bin)")
    libs = sorted(glob.glob(os.path.join(os.path.dirname(replayssm_ext.__file__), "_C*.so")))
    assert len(libs) == 1, f"expected one compiled extension next to replayssm_ext/__init__.py, found {libs}"
    so_path = libs[0]
    out = subprocess.run([tool, "--list-elf", so_path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"cuobjdump --list-elf {so_path} failed: {out.stderr.strip()}"
    # Names look like "cursor.sm_90a.cubin", or "launch.1.sm_90a.cubin" (nvcc numbers some).
    pairs = set(re.findall(r"ELF file\s+\d+:\s+(\S+?)(?:\.\d+)?\.(sm_\d+[af]?)\.cubin", out.stdout))
    assert pairs, f"no cubins found in {so_path}; cuobjdump said:\n{out.stdout}{out.stderr}"
    return pairs


def test_extension_holds_cubins_for_every_requested_arch():
    expected = _expected_archs()
    archs_found = {arch for _, arch in _cubins()}
    assert expected <= archs_found, (
        f"TORCH_CUDA_ARCH_LIST asks for {sorted(expected)}, the .so holds cubins for {sorted(archs_found)}")


def test_every_kernel_file_is_compiled_in():
    sources = sorted(glob.glob(os.path.join(REPO_ROOT, "csrc", "kernels", "*.cu")))
    if not sources:
        pytest.skip("csrc/kernels/ is not next to the tests (installed package): nothing to compare against")
    stems_found = {stem for stem, _ in _cubins()}
    missing = [os.path.basename(s) for s in sources if os.path.splitext(os.path.basename(s))[0] not in stems_found]
    assert not missing, f"kernel files without any cubin in the .so (rebuild?): {missing}"
