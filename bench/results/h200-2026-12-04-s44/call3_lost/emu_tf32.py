# Emulates WindowMma::chunk (split-tf32) lane by lane with the PTX m16n8k8 tf32 fragment layouts,
# for K in (64, 128, 256), kOut in (8, 16), rows 16 / 8; checks every (row, output) against fp64.
import numpy as np
rng = np.random.default_rng(0)
kWarps = 4
def trunc_tf32(x):  # hardware view of a tf32 operand: low 13 mantissa bits dropped
    b = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xffffe000)
    return b.view(np.float32)
def split(x):
    hi = trunc_tf32(x); lo = np.float32(np.float32(x) - hi); return hi, lo
def run(K, kOut, rows):
    S = rng.standard_normal((rows, K)).astype(np.float32)
    W = rng.standard_normal((kOut, K)).astype(np.float32)
    kNTiles = (kOut + 7) // 8
    kWarpPieces = K // 4 // kWarps; kHalves = 2 if kWarpPieces >= 8 else 1
    kBlockPieces = 4 * kHalves; kBlocks = kWarpPieces // kBlockPieces
    piece = lambda w, b, t, h: w * kWarpPieces + b * kBlockPieces + kHalves * t + h
    part = np.zeros((kWarps, rows, 8 * kNTiles))
    for w in range(kWarps):
        for m0 in range(0, rows, 16):
            acc = np.zeros((kNTiles, 3, 16, 8))  # D as a matrix per term
            for b in range(kBlocks):
                for h in range(kHalves):
                    for e in range(2):
                        # Build the A (16x8) and B (8x8) tiles the warp's lanes hand to this mma.
                        Ahi = np.zeros((16, 8), np.float32); Alo = Ahi.copy()
                        Bhi = np.zeros((kNTiles, 8, 8), np.float32); Blo = Bhi.copy()
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            p = piece(w, b, t, h)
                            for r, kk, v in ((g, t, 2 * e), (g + 8, t, 2 * e), (g, t + 4, 2 * e + 1), (g + 8, t + 4, 2 * e + 1)):
                                x = S[m0 + r, 4 * p + v] if m0 + r < rows else np.float32(0)
                                Ahi[r, kk], Alo[r, kk] = split(x)
                            for nt in range(kNTiles):
                                m = nt * 8 + g
                                for kk, v in ((t, 2 * e), (t + 4, 2 * e + 1)):
                                    x = W[m, 4 * p + v] if m < kOut else np.float32(0)
                                    Bhi[nt, kk, g], Blo[nt, kk, g] = split(x)
                        th = lambda a: trunc_tf32(a).astype(np.float64)
                        for nt in range(kNTiles):
                            acc[nt, 0] += th(Alo) @ th(Bhi[nt]); acc[nt, 1] += th(Ahi) @ th(Blo[nt]); acc[nt, 2] += th(Ahi) @ th(Bhi[nt])
            for nt in range(kNTiles):
                tot = (acc[nt, 0] + acc[nt, 1]) + acc[nt, 2]
                for r in range(16):
                    if m0 + r < rows: part[w, m0 + r, nt * 8:(nt + 1) * 8] = tot[r]
    got = part.sum(0)[:, :kOut]
    ref = S.astype(np.float64) @ W.astype(np.float64).T
    scale = np.abs(S).astype(np.float64) @ np.abs(W).astype(np.float64).T
    return np.max(np.abs(got - ref) / scale)
for K in (64, 128, 256):
    for kOut in (8, 16):
        for rows in (16, 8):
            err = run(K, kOut, rows)
            print(K, kOut, rows, f"max |err| / (|S||W|) = {err:.2e}  (2^-19 = {2**-19:.2e})")
            assert err < 2 ** -19
