"""Which SMs a green context of N SMs really runs on: each program of a Triton kernel writes %smid
(session 57's check of the benchmark's --sms partitions; run on the GPU machine)."""
import torch
import triton
import triton.language as tl
from torch.cuda.green_contexts import GreenContext


@triton.jit
def smid_kernel(out_ptr):
    pid = tl.program_id(0)
    z = tl.zeros([1], tl.int32) + pid
    sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [z], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + pid + tl.arange(0, 1), sm)


n = 1 << 16
for sms in (None, 64, 80, 88, 96, 112):
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    if sms is None:
        smid_kernel[(n,)](out)
    else:
        g = GreenContext.create(num_sms=sms, device_id=0)
        s = g.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            smid_kernel[(n,)](out)
        torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    used = torch.unique(out).tolist()
    print(f"asked {sms}: {len(used)} SMs ran programs")
