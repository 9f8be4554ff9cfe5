// The rank update of mamba2_decode's state-and-output route on tensor cores (replay_kernel.cuh's
// kMmaUpdate instances): acc = c0 S0 + X B over a CTA's (p_chunk x N) fp32 state tile, with
// X[p][j] = w_j x_j[p] and B[j][n] = B_j[n] over the row's n_upd entries, then y[p] = acc . C.
//
// Why: on the CUDA cores the update is one FFMA per state element and entry, plus its shared
// loads; at hist 8 those alone put the route at ~1.2x the output-only step's instructions, which
// issue-bound it (ncu, docs/perf-notes.md, Mamba-2 plain decode, "Session 33"). Here a warp's
// 16 x 32 piece of the tile takes, per 16 entries, three bf16 mma per 8 columns: X as three bf16
// terms whose sum is exactly the fp32 product w_j x_j[p] (split_bf16x3), B_j exact (bf16
// activations), accumulated in fp32 on the registers the state was loaded into. A tile that is
// not stored takes the first two terms only (ReplayMmaStream::run says why).
//
// How the work is split: every warp walks all 16-row tiles of the chunk, each warp its own 32
// columns (unit `warp`; the columns within it in the order of mma_staged_col, so that each lane
// moves four consecutive state columns per 16-byte access), so the warps of a CTA stay level
// whatever the chunk's row count. The spec kernels' MmaStateStream::run gives each warp
// whole tiles instead; on the decode (P = 80: five tiles for four warps) that left one warp with
// twice the others' rows, and put the state through at 54-61 % of copy bandwidth (session 11's
// wip/m2-so-mma, docs/perf-notes.md, "Session 11"). One unit (16 floats per lane) is in flight
// ahead of the one being worked on. The A fragments (X, three terms) are built once per CTA into
// shared memory in fragment order (replay_mma_build_a: one 16-byte load per term and lane); the
// B fragments come from the staged B_j rows by ldmatrix.trans (row stride ldmatrix_row_stride).
// Each warp's dot products with C cover its columns only; the output sums the warps' partials.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/common/mma_state_stream.cuh"
#include "replayssm/mamba2/entries.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// The instances built with the tensor-core update: an fp32 checkpoint (the accumulator is the
// state), bf16 activations (B_j exact in bf16), and N one 32-column unit per warp (N = 128 at four
// warps: the model geometries). Two units per warp (N = 256) held 16 C values per lane and spilled
// 136 bytes at the 64-register bound (sm_90a), so that width keeps the CUDA-core update. The
// launcher also requires a 16-byte aligned state view (16-byte lane loads and stores without a
// run-time test) and the state-and-output route (replay_mma_choice).
template <typename Act, typename St, int N, int kWarps>
constexpr bool kReplayMma = std::is_same_v<St, float> && std::is_same_v<Act, __nv_bfloat16> && N == 32 * kWarps;

// 32-bit words of the A fragments in shared memory: per 16-row tile of the chunk and per 16
// entries of the ring, three terms of 32 lanes x 4 registers.
constexpr int kMmaAFragWords = 3 * 32 * 4;
__host__ __device__ inline int replay_mma_a_words(int R, int p_chunk) {
  return (p_chunk + kMmaTileRows - 1) / kMmaTileRows * ((R + 15) / 16) * kMmaAFragWords;
}

// The A fragments of X[p][j] = weight[j] * x_raw[j * p_chunk + p] (zero for p >= plen or
// j >= n_upd): word ((tile * ksteps + ks) * 3 + term) * 128 + lane * 4 + m is register m of lane
// (4 g + t) for rows tile * 16 + g (+ 8 for odd m) and entries 16 ks + 2t (+ 8 for m >= 2), +1.
// Each of the kThreads (one per word of a (tile, k-step) block) writes its word of every block, so
// its row and entry offsets are set once.
template <int kThreads>
__device__ __forceinline__ void replay_mma_build_a(uint32_t* a_frag, const float* weight, const __nv_bfloat16* x_raw,
                                                   int p_chunk, int plen, int n_upd, int tid) {
  static_assert(kThreads == 128, "one thread per word of a (tile, k-step) block of the A fragments");
  const int m = tid & 3, lane = tid >> 2;
  const int row = (lane >> 2) + 8 * (m & 1), k = 2 * (lane & 3) + 8 * (m >> 1);
  const int ksteps = (n_upd + 15) / 16;
  uint32_t* dst = a_frag + lane * 4 + m;
  for (int m0 = 0; m0 < plen; m0 += kMmaTileRows) {
    const int pl = m0 + row;
    for (int ks = 0; ks < ksteps; ++ks, dst += kMmaAFragWords) {
      const int j = 16 * ks + k;
      float v0 = 0.f, v1 = 0.f;
      if (pl < plen) {
        if (j < n_upd) v0 = weight[j] * __bfloat162float(x_raw[j * p_chunk + pl]);
        if (j + 1 < n_upd) v1 = weight[j + 1] * __bfloat162float(x_raw[(j + 1) * p_chunk + pl]);
      }
      uint32_t hi, mid, lo;
      split_bf16x3(v0, v1, hi, mid, lo);
      dst[0] = hi, dst[128] = mid, dst[256] = lo;
    }
  }
}

// The column order of the staged B_j rows: within each 16-column block, staged position 8 h + g
// holds state column 4 (g / 2) + 2 h + g % 2. ldmatrix.trans gives n-tile h's accumulator column
// c the B column at staged position 8 h + c, so a lane (4 g + t) then holds state columns 4t ..
// 4t + 3 of each block (n-tile 0: 4t, 4t + 1; n-tile 1: 4t + 2, 4t + 3): one 16-byte load per row
// and block instead of two 8-byte ones (MmaStateStream's order, whose loads kept L1 77 % busy at
// nano batch 256: ncu, session 35).
__host__ __device__ constexpr int mma_staged_col(int n) {  // state column n -> staged position
  return (n & ~15) + 8 * ((n >> 1) & 1) + 2 * ((n & 15) >> 2) + (n & 1);
}
__host__ __device__ constexpr int mma_state_col(int q) {  // staged position q -> state column
  return (q & ~15) + 4 * ((q & 7) >> 1) + 2 * ((q >> 3) & 1) + (q & 1);
}
__host__ __device__ constexpr bool mma_staged_order_inverts() {
  for (int n = 0; n < 32; ++n)
    if (mma_state_col(mma_staged_col(n)) != n || mma_staged_col(n) >> 4 != n >> 4) return false;
  return true;
}
static_assert(mma_staged_order_inverts() && mma_staged_col(6) == 10,
              "the staged order is a permutation within 16-column blocks");

// The B_j rows of entries 0 .. n_ent-1 for the tensor-core update (row stride ld). Where `vec`,
// by 16-byte cp.async in state column order, each 16-column block (32 bytes) by one thread, which
// puts it in mma_staged_col order after the copies land (permute_b_mma_order); else element by
// element, straight into that order. The copies are stage_entries' 16-byte pieces: copying 4-byte
// pieces (the finest that keep a staged pair together) straight into the staged order takes four
// times the cp.async, and that form ran batch 1 at B = 32 3 % slower than the 8-byte lane order it
// replaced (H200, session 36, call 1). The caller commits and waits.
// f(j, n) for each 16-column block (entry j, first column n) that thread tid owns: the one mapping
// of stage_b_mma_order's copies and permute_b_mma_order's in-place reorder, which must agree (a
// thread reorders only blocks whose copies it waited for).
template <int kThreads, typename F>
__device__ __forceinline__ void for_each_b_block(int n_ent, int N, int tid, F&& f) {
  const int blocks = N / 16;
  for (int e = tid; e < n_ent * blocks; e += kThreads) {
    const int j = e / blocks;
    f(j, 16 * (e - j * blocks));
  }
}

template <int kThreads>
__device__ __forceinline__ void stage_b_mma_order(__nv_bfloat16* dst, int ld, const EntryRows<__nv_bfloat16>& rows,
                                                  int n_ent, int N, bool vec, int tid) {
  if (vec) {
    for_each_b_block<kThreads>(n_ent, N, tid, [&](int j, int n) {
      cp_async16(dst + j * ld + n, rows.row(j) + n);
      cp_async16(dst + j * ld + n + 8, rows.row(j) + n + 8);
    });
  } else {
    for (int e = tid; e < n_ent * N; e += kThreads) {
      const int j = e / N, n = e - j * N;
      dst[j * ld + mma_staged_col(n)] = rows.row(j)[n];
    }
  }
}

// The second half of stage_b_mma_order's `vec` path, by the same threads after their copies have
// landed (cp_async_wait: a thread's own copies are then visible to it, so no barrier stands
// between): each 16-column block from state column order to mma_staged_col order, in place. Word
// w of a block holds columns 2w, 2w + 1; staged half h takes words h, h + 2, h + 4, h + 6.
template <int kThreads>
__device__ __forceinline__ void permute_b_mma_order(__nv_bfloat16* dst, int ld, int n_ent, int N, bool vec, int tid) {
  if (!vec) return;
  for_each_b_block<kThreads>(n_ent, N, tid, [&](int j, int n) {
    uint4* const block = reinterpret_cast<uint4*>(dst + j * ld + n);
    const uint4 lo = block[0], hi = block[1];
    block[0] = make_uint4(lo.x, lo.z, hi.x, hi.z);
    block[1] = make_uint4(lo.y, lo.w, hi.y, hi.w);
  });
}
static_assert(mma_staged_col(2) == 8 && mma_staged_col(4) == 2 && mma_staged_col(9) == 5,
              "permute_b_mma_order's word order: staged half h holds columns 4 k + 2 h, + 1");

template <int N, int kWarps>
struct ReplayMmaStream {
  using Tiles = MmaStateStream<N, kWarps, 1>;
  using Unit = typename Tiles::Unit;
  static_assert(Tiles::kUnits == kWarps, "one 32-column unit per warp");

  Tiles tiles;  // S = the chunk's first row, tile_rows = plen
  int warp;

  // f(r, offset, ss, half) for each 16-byte piece of this warp's unit of the tile at row m0 that
  // this lane holds: v[ss][h][2 half + e] is state row r, column offset + 2 h + e (mma_staged_col).
  template <typename F>
  __device__ __forceinline__ void for_each_vec(int m0, F&& f) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int half = 0; half < 2; ++half) f(m0 + g + 8 * half, 32 * warp + 16 * ss + 4 * t, ss, half);
  }

  // This warp's unit (columns 32 warp ..) of the tile at row m0.
  __device__ __forceinline__ void load(int m0, Unit& v) const {
    for_each_vec(m0, [&](int r, int col, int ss, int half) {
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < tiles.tile_rows) x = __ldcs(reinterpret_cast<const float4*>(tiles.S + static_cast<int64_t>(r) * N + col));
      v[ss][0][2 * half] = x.x, v[ss][0][2 * half + 1] = x.y, v[ss][1][2 * half] = x.z, v[ss][1][2 * half + 1] = x.w;
    });
  }

  __device__ __forceinline__ void store(int m0, const Unit& v) const {
    for_each_vec(m0, [&](int r, int col, int ss, int half) {
      if (r < tiles.tile_rows)
        __stcs(reinterpret_cast<float4*>(tiles.S + static_cast<int64_t>(r) * N + col),
               make_float4(v[ss][0][2 * half], v[ss][0][2 * half + 1], v[ss][1][2 * half], v[ss][1][2 * half + 1]));
    });
  }

  // The first unit, loaded as soon as the slot is known, and tile 1 asked of L2 (one bulk prefetch
  // by warp 1's lane 0; the stream asks for each later tile two tiles ahead, in run).
  __device__ __forceinline__ void first_unit(Unit& v) const {
    load(0, v);
    if (warp == 1 % kWarps) tiles.prefetch_tile(kMmaTileRows);
  }

  // C at the columns this lane holds: c[ss][h][e] = C[16 (2 warp + ss) + 4 t + 2 h + e].
  __device__ __forceinline__ void load_c(const __nv_bfloat16* C_in, float (&c)[2][2][2]) const {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = __bfloat1622float2(
            *reinterpret_cast<const __nv_bfloat162*>(C_in + 16 * (2 * warp + ss) + 4 * t + 2 * h));
        c[ss][h][0] = v.x, c[ss][h][1] = v.y;
      }
  }

  // v = c0 v + X B over this warp's unit of the tile (v holds the unit's state as loaded), with X's
  // first n_terms bf16 terms (3: X exact; 2: X to 16 significant bits, see run).
  __device__ __forceinline__ void update(int tile, float c0, int n_upd, int n_terms, const uint32_t* a_frag,
                                         const __nv_bfloat16* b_raw, int ldb, const __nv_bfloat16* zeros,
                                         Unit& v) const {
    const int lane = threadIdx.x & 31, mat = lane >> 3, mat_row = lane & 7;
    const int u = warp;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[ss][h][e] *= c0;
    const int ksteps = (n_upd + 15) / 16;
    for (int ks = 0; ks < ksteps; ++ks) {
      // B: matrix m holds entries 16 ks + (m & 1) * 8 .. and columns (m >> 1) * 8 .. of the
      // 16 columns of ss: registers 0, 1 are n-tile 0's fragment, 2, 3 n-tile 1's.
      const int jk = 16 * ks + (mat & 1) * 8 + mat_row;
      uint32_t b[2][4];
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
        ldmatrix_x4_trans(b[ss], jk < n_upd ? b_raw + jk * ldb + 16 * (2 * u + ss) + (mat >> 1) * 8 : zeros);
      // One term's A fragment at a time (4 registers live, not 12), smallest terms first as in
      // MmaStateStream::fold_unit: the accumulator then meets them before it grows.
      const uint4* const a = reinterpret_cast<const uint4*>(a_frag + (tile * ksteps + ks) * kMmaAFragWords) + lane;
#pragma unroll
      for (int term = 2; term >= 0; --term) {
        if (term >= n_terms) continue;
        const uint4 a4 = a[32 * term];
        const uint32_t a_term[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
        for (int ss = 0; ss < 2; ++ss)
#pragma unroll
          for (int h = 0; h < 2; ++h) mma_bf16_16816(v[ss][h], a_term, b[ss][2 * h], b[ss][2 * h + 1]);
      }
    }
  }

  // This warp's share of the dot products with C of rows g and g + 8 of a tile: part[half] = the
  // sum over the lane's columns.
  __device__ __forceinline__ static void add_dots(const Unit& v, const float (&c)[2][2][2], float (&part)[2]) {
    part[0] = 0.f, part[1] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) part[half] = fmaf(v[ss][h][2 * half + e], c[ss][h][e], part[half]);
  }

  // The whole stream of this warp over the chunk's tiles: the update, the state write (store),
  // and the warp's partial dot products into dot_part[warp * p_chunk + row]. cur: this warp's
  // first unit, loaded as soon as the slot was known.
  // A tile that is stored (a flush row's fold) takes X's three terms: the checkpoint carries its
  // error into every later step. One that is not (a state-and-output row that does not flush) is
  // read only for its dot products with C, rounded to the activation dtype: X's first two terms
  // (relative error below 2^-16 per product, against bf16's 2^-9 on the output) save a third of
  // the mma and A fragment loads.
  __device__ __forceinline__ void run(Unit& cur, float c0, int n_upd, bool store, const uint32_t* a_frag,
                                      const __nv_bfloat16* b_raw, int ldb, const __nv_bfloat16* zeros,
                                      const float (&c)[2][2][2], float* dot_part, int p_chunk) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int plen = tiles.tile_rows;
    const int num_tiles = (plen + kMmaTileRows - 1) / kMmaTileRows;
    for (int tile = 0; tile < num_tiles; ++tile) {
      const int m0 = tile * kMmaTileRows;
      // The next tile's unit in registers, and the one after it asked of L2 (by one warp per tile):
      // each warp holds one unit in flight, and the CTA's prologue and its outputs have nothing else
      // in flight.
      if (warp == tile % kWarps) tiles.prefetch_tile(m0 + 2 * kMmaTileRows);
      Unit nxt;
      if (tile + 1 < num_tiles) load(m0 + kMmaTileRows, nxt);
      update(tile, c0, n_upd, store ? 3 : 2, a_frag, b_raw, ldb, zeros, cur);
      if (store) this->store(m0, cur);
      float part[2];
      add_dots(cur, c, part);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        part[half] += __shfl_xor_sync(0xffffffffu, part[half], 1);
        part[half] += __shfl_xor_sync(0xffffffffu, part[half], 2);
        const int r = m0 + g + 8 * half;
        if (t == 0 && r < plen) dot_part[warp * p_chunk + r] = part[half];
      }
#pragma unroll
      for (int ss = 0; ss < 2; ++ss)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e) cur[ss][h][e] = nxt[ss][h][e];
    }
  }
};

}  // namespace replayssm::mamba2
