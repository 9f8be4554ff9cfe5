"""Fake (meta) kernels of every replayssm op, for ``torch.compile`` and fake-tensor tracing.

Every op returns nothing and only mutates its ``!`` arguments, so a fake kernel checks shapes,
dtypes, devices and contiguity (the part of ``_validate`` that needs no tensor contents) and
returns None.
"""

import functools

import torch

from . import _validate

OPS = (
    "commit",
    "reset",
    "mamba2_decode",
    "mamba2_spec_verify",
    "mamba2_flush",
    "mamba2_state_update",
    "gdn_decode",
    "gdn_spec_verify",
    "gdn_flush",
    "gdn_state_update",
)

# commit / reset have no tensor-content checks to leave out; the others take check_values.
_NO_VALUE_CHECKS = ("commit", "reset")


def _fake_kernel(name: str):
    check = getattr(_validate, f"check_{name}")

    @functools.wraps(check)
    def fake(*args, **kwargs):
        if name in _NO_VALUE_CHECKS:
            check(*args, **kwargs)
        else:
            check(*args, **kwargs, check_values=False)
        return None

    return fake


for _name in OPS:
    torch.library.register_fake(f"replayssm::{_name}", _fake_kernel(_name))
