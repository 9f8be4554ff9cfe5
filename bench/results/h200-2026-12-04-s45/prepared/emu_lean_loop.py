"""Lane-by-lane check of the lean tensor-core state-and-output loop's index arithmetic
(docs/prepared/m2-decode-mma-lean-loop.patch) against the form it replaces (main's
ReplayMmaStream in mamba2/replay_mma.cuh): for every warp, lane and tile, the state pieces loaded
and stored (and their predicates), the ldmatrix addresses of B, the A fragment block, and the C values a
lane multiplies with (the dot products' rows keep main's expression). Plain Python, no GPU."""
import itertools

N, W = 128, 4            # dstate, warps (kReplayMma: N = 32 * kWarps)
TILE = 16

def old_pieces(m0, warp, lane, plen):
    g, t = lane >> 2, lane & 3
    out = {}
    for ss, half in itertools.product(range(2), range(2)):
        r, col = m0 + g + 8 * half, 32 * warp + 16 * ss + 4 * t
        out[(ss, half)] = (r * N + col) if r < plen else None
    return out

def new_pieces(m0, warp, lane, plen):
    g, t = lane >> 2, lane & 3
    piece0 = (0 + g) * N + 32 * warp + 4 * t + m0 * N  # state = piece0(0) + tile * 16 N
    rows_left = plen - m0 - g
    out = {}
    for ss, half in itertools.product(range(2), range(2)):
        off = 8 * N * half + 16 * ss
        out[(ss, half)] = (piece0 + off) if 8 * half < rows_left else None
    return out

def old_b(ks, warp, lane, n_upd, ldb):
    mat, mat_row = lane >> 3, lane & 7
    jk = 16 * ks + (mat & 1) * 8 + mat_row
    return [jk * ldb + 16 * (2 * warp + ss) + (mat >> 1) * 8 if jk < n_upd else 'zeros' for ss in range(2)]

def new_b(ks, warp, lane, n_upd, ldb):
    mat, mat_row = lane >> 3, lane & 7
    jk0 = (mat & 1) * 8 + mat_row
    b_lane = jk0 * ldb + 32 * warp + (mat >> 1) * 8
    return [16 * ks * ldb + b_lane + 16 * ss if 16 * ks + jk0 < n_upd else 'zeros' for ss in range(2)]

def c_old(warp, lane, C):
    t = lane & 3
    return [[[C[16 * (2 * warp + ss) + 4 * t + 2 * h + e] for e in range(2)] for h in range(2)] for ss in range(2)]

def c_new(warp, lane, C):
    # store_c by lanes 0-3 of each warp, from their load_c registers
    c_s = [None] * N
    for w in range(W):
        for ln in range(4):
            c = c_old(w, ln, C)
            t = ln & 3
            for ss in range(2):
                base = 16 * (2 * w + ss) + 4 * t
                c_s[base:base + 4] = [c[ss][0][0], c[ss][0][1], c[ss][1][0], c[ss][1][1]]
    t = lane & 3
    out = [[[None] * 2 for _ in range(2)] for _ in range(2)]
    for ss in range(2):
        v = c_s[16 * (2 * warp + ss) + 4 * t: 16 * (2 * warp + ss) + 4 * t + 4]
        out[ss][0][0], out[ss][0][1], out[ss][1][0], out[ss][1][1] = v
    return out

C = [float(i) * 0.5 + 1 for i in range(N)]
checked = 0
for plen in (16, 40, 48, 64, 80, 8, 24):
    p_chunk = plen
    num_tiles = (plen + TILE - 1) // TILE
    for n_upd in (0, 1, 9, 16, 17, 33):
        ldb = N + 8
        ksteps = (n_upd + 15) // 16
        for warp, lane in itertools.product(range(W), range(32)):
            assert c_old(warp, lane, C) == c_new(warp, lane, C)
            for tile in range(num_tiles):
                m0 = tile * TILE
                assert old_pieces(m0, warp, lane, plen) == new_pieces(m0, warp, lane, plen), (plen, tile, warp, lane)
                if tile + 1 < num_tiles:  # the next tile's loads: new_pieces at m0 + 16, rows_left - 16
                    assert old_pieces(m0 + TILE, warp, lane, plen) == new_pieces(m0 + TILE, warp, lane, plen)
                for ks in range(ksteps):
                    assert old_b(ks, warp, lane, n_upd, ldb) == new_b(ks, warp, lane, n_upd, ldb)
                    # A block: (tile * ksteps + ks) in both forms
                # prefetch: (tile & 3) == warp vs tile % 4 == warp
                assert ((tile & (W - 1)) == warp) == (tile % W == warp)
                checked += 1
# A whole tile (load_at's tile_full: plen - m0 >= 16, warp-uniform) holds both rows of every lane,
# so its loads need no test: 8 half < rows_left for half 0, 1 and every g.
for plen in range(1, 97):
    for m0 in range(0, plen, TILE):
        if plen - m0 >= TILE:
            assert all(8 * half < plen - m0 - (lane >> 2) for lane in range(32) for half in range(2))
# Rows a lane does not load (rows_left <= 8 half) are rows >= plen: never stored, never in dot_part.
for plen in (8, 24, 40):
    for lane in range(32):
        g = lane >> 2
        for m0 in range(0, plen + TILE, TILE):
            for half in range(2):
                unset = not (8 * half < plen - m0 - g)
                assert unset == (m0 + g + 8 * half >= plen)
print("lean loop index arithmetic: identical to main's form in", checked, "(warp, lane, tile) cases")
