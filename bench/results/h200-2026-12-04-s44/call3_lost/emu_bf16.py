# The error of the split-bf16 products main takes today (hi = bf16(x), lo = bf16(x - hi), lo.hi + hi.lo
# + hi.hi), in fp64 matrix form, for comparison with emu_tf32.py (same seed and shapes).
import numpy as np
rng = np.random.default_rng(0)
def bf(x):  # round to nearest even bf16
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000
    return b.astype(np.uint32).view(np.float32)
for K in (64,128,256):
    S = rng.standard_normal((16, K)).astype(np.float32); W = rng.standard_normal((16, K)).astype(np.float32)
    Sh = bf(S); Sl = bf(S - Sh); Wh = bf(W); Wl = bf(W - Wh)
    d = lambda a: a.astype(np.float64)
    got = d(Sl) @ d(Wh).T + d(Sh) @ d(Wl).T + d(Sh) @ d(Wh).T
    ref = d(S) @ d(W).T; scale = np.abs(d(S)) @ np.abs(d(W)).T
    print(K, f"{np.max(np.abs(got-ref)/scale):.2e}")
