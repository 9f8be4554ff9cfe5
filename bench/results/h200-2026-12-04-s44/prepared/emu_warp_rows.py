# Emulates the whole-row warp stream (WindowRowsMma + the kernel's loop) lane by lane: the units'
# cp.async copies into the swizzled slot, the reads of WindowRowsMma::unit, the B fragments through
# bfrag ([q][w/4][lane][w%4]), m16n8k16 bf16 fragment semantics (PTX ISA), and the outputs' (row,
# output) mapping; checks the products S . W^T of every row against fp64 (K = 128, kOut = 8, rows 64
# and 256). Then the folding CTAs' addressing: fold_tile_mma's accumulator pairs on a unit slot and
# store_unit's copies back to the state, for every quarter.
import numpy as np
rng = np.random.default_rng(1)
K, kWarps, kOut = 128, 4, 8
kUnitCols = K // kWarps; kRowPieces = kUnitCols // 4; kWarpPieces = K // 4 // kWarps
kHalves = 2 if kWarpPieces >= 8 else 1; kBlockPieces = 4 * kHalves; kBlocks = kWarpPieces // kBlockPieces
kSteps = kBlocks * kHalves; kNTiles = 1; kFragWords = 2 * kNTiles * kSteps * 2
def copies(q):
    """(source offset in the group's 16 x K floats, slot offset) of every 16-byte piece of quarter q's
    unit, as the lanes copy them (WindowRowsMma::lane_copies / issue_unit; store_unit reverses them)."""
    for lane in range(32):
        r0, pc = lane // kRowPieces, lane % kRowPieces
        lsrc = r0 * K + 4 * pc; ldst = [r0 * kUnitCols + 4 * (pc ^ r0), r0 * kUnitCols + 4 * (pc ^ (r0 + 4))]
        for j in range(16 * kUnitCols // 4 // 32):
            yield q * kUnitCols + lsrc + 4 * j * K, ldst[j & 1] + 4 * j * kUnitCols
def piece(w, b, t, h): return w * kWarpPieces + b * kBlockPieces + kHalves * t + h
def bf(x):
    b = np.asarray(x, np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    b = (b + 0x7fff + ((b >> 16) & 1)) & 0xffff0000
    return b.astype(np.uint32).view(np.float32).reshape(np.shape(x))
def split(x): hi = bf(x); return hi, bf(np.float32(x) - hi)
def run(rows):
    S = rng.standard_normal((rows, K)).astype(np.float32); W = rng.standard_normal((kOut, K)).astype(np.float32)
    # bfrag: each (warp q, lane) stores load_all_b(s_win, q, lane): per step s, hi[0]=(w.x,w.y), hi[1]=(w.z,w.w) of row m=g
    bfrag = {}
    for q in range(kWarps):
        for lane in range(32):
            g, t = lane >> 2, lane & 3; words = []
            his, los = [], []
            for b in range(kBlocks):
                for h in range(kHalves):
                    w4 = W[g, 4 * piece(q, b, t, h):4 * piece(q, b, t, h) + 4] if g < kOut else np.zeros(4, np.float32)
                    hi, lo = split(w4); his += [hi[0:2], hi[2:4]]; los += [lo[0:2], lo[2:4]]
            for wd, val in enumerate(his + los):
                at = ((q * (kFragWords // 4) + wd // 4) * 32 + lane) * 4 + wd % 4
                bfrag[at] = val
    out = np.zeros((rows, kOut)); groups = rows // 16
    for warp in range(kWarps):
        units = (groups - warp + kWarps - 1) // kWarps * kWarps
        for u in range(units):
            gi = warp + (u // kWarps) * kWarps; q = u % kWarps
            slot = np.zeros(16 * kUnitCols, np.float32)
            for so, d in copies(q):  # issue_unit
                slot[d:d + 4] = S[gi * 16:gi * 16 + 16].reshape(-1)[so:so + 4]
            if q == 0: acc = np.zeros((16, 8))
            for b in range(kBlocks):
                for h in range(kHalves):
                    s = b * kHalves + h
                    A = np.zeros((16, 16)); B = np.zeros((16, 8)); Alo = A.copy(); Blo = B.copy()
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        at = 4 * ((b * kBlockPieces + kHalves * t + h) ^ g)
                        for r in (g, g + 8):
                            v = slot[r * kUnitCols + at: r * kUnitCols + at + 4]; hi, lo = split(v)
                            for kk, idx in ((2 * t, 0), (2 * t + 1, 1), (2 * t + 8, 2), (2 * t + 9, 3)):
                                A[r, kk] = hi[idx]; Alo[r, kk] = lo[idx]
                        hw = [bfrag[((q * (kFragWords // 4) + wd // 4) * 32 + lane) * 4 + wd % 4] for wd in range(kFragWords)]
                        bh0, bh1 = hw[2 * s], hw[2 * s + 1]; bl0, bl1 = hw[2 * kSteps + 2 * s], hw[2 * kSteps + 2 * s + 1]
                        B[2 * t, g], B[2 * t + 1, g], B[2 * t + 8, g], B[2 * t + 9, g] = bh0[0], bh0[1], bh1[0], bh1[1]
                        Blo[2 * t, g], Blo[2 * t + 1, g], Blo[2 * t + 8, g], Blo[2 * t + 9, g] = bl0[0], bl0[1], bl1[0], bl1[1]
                    acc += Alo @ B + A @ Blo + A @ B
            if q == kWarps - 1:
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    for e in range(4):
                        m = 2 * t + (e & 1); vl = gi * 16 + g + (e >> 1) * 8
                        if m < kOut: out[vl, m] = acc[g + (e >> 1) * 8, m]
    ref = S.astype(np.float64) @ W.astype(np.float64).T
    scale = np.abs(S).astype(np.float64) @ np.abs(W).astype(np.float64).T
    return np.max(np.abs(out - ref) / scale)
for rows in (64, 256):
    err = run(rows); print(rows, f"{err:.2e}"); assert err < 2 ** -15

# The fold's addressing on a unit (fold_tile_mma with ld = kUnitCols, c0 = buf_c0 = 32 q): lane (g, t)'s
# accumulator pair of n-tile nt in rows g and g + 8 must be the unit slot's copy of state columns
# c, c + 1 (c = 32 q + 8 nt + 2 t) of those rows, where issue_unit put them.
kVec = 4
for q in range(kWarps):
    S = rng.standard_normal((16, K)).astype(np.float32)
    slot = np.zeros(16 * kUnitCols, np.float32)
    for so, d in copies(q):
        slot[d:d + 4] = S.reshape(-1)[so:so + 4]
    c0 = buf_c0 = q * kUnitCols
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for nt in range(kUnitCols // 8):
            c = c0 + nt * 8 + 2 * t
            for r in (g, g + 8):
                at = r * kUnitCols + ((c // kVec) ^ g) * kVec - buf_c0 + c % kVec
                assert slot[at] == S[r, c] and slot[at + 1] == S[r, c + 1], (q, lane, nt, r)
    # store_unit: the reverse copies put every element back in place.
    back = np.zeros(16 * K, np.float32)
    for so, d in copies(q):
        back[so:so + 4] = slot[d:d + 4]
    assert np.array_equal(back.reshape(16, K)[:, c0:c0 + kUnitCols], S[:, c0:c0 + kUnitCols])
print("fold addressing and store_unit: every quarter's unit maps back exactly")
