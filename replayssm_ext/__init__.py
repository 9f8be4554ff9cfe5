"""replayssm: ReplaySSM decoding for Mamba-2 and Gated DeltaNet as PyTorch custom ops.

Importing the package loads the compiled extension, which registers every schema under
``torch.ops.replayssm`` (and the CUDA kernels when built with CUDA), then registers the CPU
implementations backed by the Python reference and the fake (meta) kernels.
"""

import glob
import os

import torch

_here = os.path.dirname(os.path.abspath(__file__))
_libs = sorted(glob.glob(os.path.join(_here, "_C*.so")) + glob.glob(os.path.join(_here, "_C*.pyd")))
if not _libs:
    raise ImportError(
        "replayssm_ext: the compiled extension _C is missing; install the package "
        "(pip install --no-build-isolation -e .) from the repository root")
torch.ops.load_library(_libs[0])

from . import _cpu_ops, _fake  # noqa: E402,F401  (registrations)
from .cache import Cursors, GDNCache, Mamba2Cache, plan_concurrency  # noqa: E402
from .ops import (  # noqa: E402
    commit,
    gdn_decode,
    gdn_flush,
    gdn_spec_verify,
    gdn_state_update,
    mamba2_decode,
    mamba2_flush,
    mamba2_spec_verify,
    mamba2_state_update,
    reset,
)

HAS_CUDA_KERNELS = torch._C._dispatch_has_kernel_for_dispatch_key("replayssm::commit", "CUDA")

__all__ = [
    "Cursors", "Mamba2Cache", "GDNCache", "plan_concurrency",
    "commit", "reset",
    "mamba2_decode", "mamba2_spec_verify", "mamba2_flush", "mamba2_state_update",
    "gdn_decode", "gdn_spec_verify", "gdn_flush", "gdn_state_update",
    "HAS_CUDA_KERNELS",
]
