// The rank update of mamba2_decode's state-and-output route on tensor cores (replay_kernel.cuh's
// kMmaUpdate instances): acc = c0 S0 + X B over a CTA's (p_chunk x N) fp32 state tile, with
// X[p][j] = w_j x_j[p] and B[j][n] = B_j[n] over the row's n_upd entries, then y[p] = acc . C.
//
// Why: on the CUDA cores the update is one FFMA per state element and entry, plus its shared
// loads; at hist 8 those alone put the route at ~1.2x the output-only step's instructions, which
// issue-bound it (ncu, docs/perf-notes.md, Mamba-2 plain decode, "Session 33"). Here a warp's
// 16 x 32 piece of the tile takes, per 16 entries, three bf16 mma per 8 columns: X as three bf16
// terms whose sum is exactly the fp32 product w_j x_j[p] (split_bf16x3), B_j exact (bf16
// activations), accumulated in fp32 on the registers the state was loaded into.
//
// How the work is split: every warp walks all 16-row tiles of the chunk, each warp its own 32
// columns (unit `warp` of MmaStateStream's layout), so the warps of a CTA
// stay level whatever the chunk's row count. The spec kernels' MmaStateStream::run gives each warp
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
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// The instances built with the tensor-core update: an fp32 checkpoint (the accumulator is the
// state), bf16 activations (B_j exact in bf16), and N one 32-column unit per warp (N = 128 at four
// warps: the model geometries). Two units per warp (N = 256) held 16 C values per lane and spilled
// 136 bytes at the 64-register bound (sm_90a), so that width keeps the CUDA-core update. The
// launcher also requires a 16-byte aligned state view (8-byte lane loads and stores without a
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

template <int N, int kWarps>
struct ReplayMmaStream {
  using Tiles = MmaStateStream<N, kWarps, 1>;
  using Unit = typename Tiles::Unit;
  static_assert(Tiles::kUnits == kWarps, "one 32-column unit per warp");

  Tiles tiles;  // S = the chunk's first row, tile_rows = plen
  int warp;

  // This warp's unit (columns 32 warp ..) of the tile at row m0.
  __device__ __forceinline__ void load(int m0, Unit& v) const { tiles.load_unit(m0, warp, v); }

  // The first unit, loaded as soon as the slot is known, and tile 1 asked of L2 (one bulk prefetch
  // by warp 1's lane 0; the stream asks for each later tile two tiles ahead, in run).
  __device__ __forceinline__ void first_unit(Unit& v) const {
    load(0, v);
    if (warp == 1 % kWarps) tiles.prefetch_tile(kMmaTileRows);
  }

  // C at the columns this lane holds: c[ss][h][e] = C[16 (2 warp + ss) + 8 h + 2 t + e].
  __device__ __forceinline__ void load_c(const __nv_bfloat16* C_in, float (&c)[2][2][2]) const {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int ss = 0; ss < 2; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = __bfloat1622float2(
            *reinterpret_cast<const __nv_bfloat162*>(C_in + 16 * (2 * warp + ss) + 8 * h + 2 * t));
        c[ss][h][0] = v.x, c[ss][h][1] = v.y;
      }
  }

  // v = c0 v + X B over this warp's unit of the tile (v holds the unit's state as loaded).
  __device__ __forceinline__ void update(int tile, float c0, int n_upd, const uint32_t* a_frag,
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
      update(tile, c0, n_upd, a_frag, b_raw, ldb, zeros, cur);
      if (store) tiles.store_unit(m0, warp, cur);
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
