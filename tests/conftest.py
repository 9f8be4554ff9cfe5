"""Shared pytest setup: the package import, device parametrization, markers.

Every op test is parametrized over a `device`: "cpu" always runs; "cuda" runs where a GPU is
present AND the op has a CUDA kernel registered (kernels land family by family), and is skipped
with the reason otherwise. The same test bodies then run unchanged on the GPU machine.

Larger variants (real model geometries) are marked `large`; they run on CUDA only, and only when
REPLAYSSM_LARGE=1 (or `-m large`) asks for them, so the CPU suite stays a few minutes on 2 cores.
"""

import os

import pytest
import torch

import replayssm_ext  # noqa: F401  (loads the extension, registers CPU and fake kernels)

# The CPU tests work on tensors of a few KB, where intra-op threads only add synchronisation (and,
# on a loaded 2-core CI machine, make the suite an order of magnitude slower).
torch.set_num_threads(1)

ALL_OPS = ("commit", "reset",
           "mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "mamba2_state_update",
           "gdn_decode", "gdn_spec_verify", "gdn_flush", "gdn_state_update")


def has_cuda_kernel(op: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"replayssm::{op}", "CUDA")


def cuda_skip_reason(ops):
    if not torch.cuda.is_available():
        return "no CUDA device"
    missing = [op for op in ops if not has_cuda_kernel(op)]
    if missing:
        return f"no CUDA kernel registered for replayssm::{', '.join(missing)}"
    return None


def devices(*ops):
    """pytest params for the `device` argument of a test that calls `ops`."""
    reason = cuda_skip_reason(ops)
    return [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(reason is not None, reason=reason or ""))]


def cuda_only(*ops):
    """pytest params for a test that only makes sense on CUDA (large geometries)."""
    reason = cuda_skip_reason(ops)
    return [pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(reason is not None, reason=reason or ""))]


LARGE = os.environ.get("REPLAYSSM_LARGE", "0") == "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "large: real-geometry variants, CUDA only, run with REPLAYSSM_LARGE=1")


def pytest_collection_modifyitems(config, items):
    if LARGE or "large" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="large variant: set REPLAYSSM_LARGE=1 (CUDA only)")
    for item in items:
        if "large" in item.keywords:
            item.add_marker(skip)
