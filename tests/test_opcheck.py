"""torch.library.opcheck on every op: schema (mutation annotations match what the op writes),
autograd registration, the fake kernel against the real one, and AOT dispatch, with small valid
inputs (helpers.valid_args) on each device that has a kernel."""

import pytest
import torch

from conftest import ALL_OPS, cuda_skip_reason
from helpers import valid_args


@pytest.mark.parametrize("op", ALL_OPS)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_opcheck(op, device):
    if device == "cuda" and cuda_skip_reason((op,)):
        pytest.skip(cuda_skip_reason((op,)))
    args = valid_args(op, device=device)
    torch.library.opcheck(getattr(torch.ops.replayssm, op).default, tuple(args.values()))


@pytest.mark.parametrize("op", [o for o in ALL_OPS if o not in ("commit", "reset")])
@pytest.mark.parametrize("act,state", [(torch.float32, torch.float32), (torch.float16, torch.bfloat16)])
def test_opcheck_other_dtypes(op, act, state):
    args = valid_args(op, act=act, state_dtype=state, seed=1)
    torch.library.opcheck(getattr(torch.ops.replayssm, op).default, tuple(args.values()))


@pytest.mark.parametrize("op", [o for o in ALL_OPS if o not in ("commit", "reset")])
def test_fake_kernel_rejects_bad_shapes_like_the_real_one(op):
    """The fake (meta) kernel raises the same shape error as the CPU op (torch.compile users see
    the same message at trace time)."""
    args = valid_args(op)
    name = "out" if "out" in args else "state"
    bad = dict(args)
    bad[name] = args[name][..., :-1].contiguous()
    with pytest.raises(RuntimeError) as cpu_err:
        getattr(torch.ops.replayssm, op)(*bad.values())
    meta = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in bad.items()}
    with pytest.raises(RuntimeError) as meta_err:
        getattr(torch.ops.replayssm, op)(*meta.values())
    assert str(meta_err.value) == str(cpu_err.value)
