"""CPU implementations of the eight SSM ops: validate (``_validate``), then run the replay
formulation of the pure-PyTorch reference (``reference``), which mutates the ``!`` arguments.

``commit`` and ``reset`` have C++ CPU implementations (csrc/ops/cursor_ops.cpp) and are not
registered here. Importing this module registers the kernels (``replayssm_ext/__init__.py`` does,
after loading the extension that defines the schemas).
"""

import functools

import torch

from . import _validate, reference

OPS = (
    "mamba2_decode",
    "mamba2_spec_verify",
    "mamba2_flush",
    "mamba2_state_update",
    "gdn_decode",
    "gdn_spec_verify",
    "gdn_flush",
    "gdn_state_update",
)

# Kept alive for the life of the process: dropping it would deregister the kernels.
_lib = torch.library.Library("replayssm", "IMPL")


def _cpu_kernel(name: str):
    check = getattr(_validate, f"check_{name}")
    run = getattr(reference, name)

    @functools.wraps(run)
    def kernel(*args, **kwargs):
        # Every check (values included) runs before the reference writes anything.
        check(*args, **kwargs, check_values=True)
        with torch.no_grad():
            run(*args, **kwargs)

    return kernel


for _name in OPS:
    _lib.impl(_name, _cpu_kernel(_name), "CPU")
