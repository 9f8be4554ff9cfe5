// A CTA's fp32 state rows streamed from global memory straight into the registers of mma.sync
// m16n8k16 fragments, with the rank-hist fold of a flush row done in place on the tensor cores.
// Shared by the spec verify kernels of both families: Mamba-2's state stream at the 8-token window
// tile (mamba2/spec_mma.cuh) and GDN's (gdn/window_stream.cuh). The families differ only in the
// products they take of each unit (Products below): Mamba-2 against its window's C (exact bf16),
// GDN against its normalised k̂_i and q̂_i (fp32, split into two bf16 terms).
//
// The state is [rows][N] fp32, rows of kHeads heads of plen rows each, contiguous. Each warp takes
// whole 16-row tiles (warp, warp + kWarps, ...), a tile in units of two 16-column k-steps:
//   - a lane holds, per k-step, rows g and g + 8 at columns 16 s + 2t, +1 and 16 s + 8 + 2t, +1
//     (lane = 4 g + t): the A fragment of the products' mma once each fp32 value is split into two
//     bf16 terms (hi + lo, within 2^-17), and also the accumulator layout of an n-tile pair, so a
//     flush row's fold acc = c0 S + X B runs as mma on the very registers the state was loaded into
//     (A = X: the tile's 16 rows x 16 history entries of w_j x_j[row], each split into three bf16
//     terms whose sum is exact; B = the history's B_j, exact bf16);
//   - a warp's load covers 8 rows x 32 contiguous bytes, whole sectors, and lane 0 asks L2 for the
//     whole tile (one bulk prefetch) when its first unit is loaded;
//   - one unit is in flight ahead of the one being worked on, across tile boundaries.
// The fold's operands come from staged entries by ldmatrix.trans: x_j as [j][row] rows and B_j as
// [j][col] rows (16-byte aligned rows; a row stride 16 bytes longer than the row keeps the 8 rows of
// one ldmatrix matrix in distinct bank groups).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/mma_bf16.cuh"

namespace replayssm {

// Rows of one mma tile: a tile never straddles two heads (the launchers require plen % 16 == 0
// where a CTA holds more than one head).
constexpr int kMmaTileRows = 16;

// Row stride, in bf16 elements, of a staged [rows][cols] tile that ldmatrix reads 8 rows of at a
// time: one 16-byte piece more than the columns, so the 8 rows of one matrix start in distinct
// bank groups (the fold's staged entries, Mamba-2's window C tile, GDN's split window rows).
__host__ __device__ inline int ldmatrix_row_stride(int cols) { return cols + 8; }

// The head (0 .. kHeads - 1) of CTA row pl of kHeads heads of plen rows each, without a division.
template <int kHeads>
__host__ __device__ __forceinline__ int head_of_row(int pl, int plen) {
  int hh = 0;
#pragma unroll
  for (int k = 1; k < kHeads; ++k) hh += pl >= k * plen ? 1 : 0;
  return hh;
}

// Everything the fold reads besides the state: S <- c0 S + sum_{j < hist} (w_j x_j[row]) B_j, per head.
struct MmaFold {
  bool active;                   // a flush row with history: fold, then store the state
  int hist;                      // entries folded (entries 0 .. hist-1)
  int R;                         // entries per head in x_raw: head hh's x_j at x_raw + (hh R + j) ldx
  int w_stride;                  // head hh's weights at fold_w + hh w_stride
  const float* c0;               // [heads]: the decay of the checkpoint
  const float* fold_w;           // [heads][w_stride]: w_j
  const __nv_bfloat16* x_raw;    // [heads][R][ldx]: x_j of the CTA's rows of each head
  int ldx;
  const __nv_bfloat16* b_raw;    // [R][ldb]: B_j, shared by the heads
  int ldb;
  const __nv_bfloat16* zeros;    // 16 zero bytes: the ldmatrix rows past the history or the tile
};

template <int N, int kWarps, int kHeads>
struct MmaStateStream {
  static constexpr int kKSteps = N / 16;
  static constexpr int kStepsPerUnit = 2;  // k-steps loaded together: 16 floats per lane
  static constexpr int kUnits = kKSteps / kStepsPerUnit;
  static_assert(N % 32 == 0, "whole units of two k-steps");
  // One unit of a lane's state values in the accumulator layout of its n-tiles: [k-step][n-tile h
  // of the k-step][e], e = 0, 1: row g, columns 16 s + 8 h + 2t, +1; e = 2, 3: row g + 8.
  using Unit = float[kStepsPerUnit][2][4];

  float* S;        // row r of the CTA's rows at S + r N (16-byte aligned)
  int tile_rows;   // kHeads * plen
  int plen;        // rows of each head

  // f(r, col, ss, h, half) for each pair of values of unit u of the tile at row m0 that this lane
  // holds: v[ss][h][2 half], v[ss][h][2 half + 1] are state row r, columns col and col + 1.
  template <typename F>
  __device__ __forceinline__ static void for_each_pair(int m0, int u, F&& f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ss = 0; ss < kStepsPerUnit; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int half = 0; half < 2; ++half) f(m0 + g + 8 * half, 16 * (u * kStepsPerUnit + ss) + 8 * h + 2 * t, ss, h, half);
  }

  __device__ __forceinline__ void load_unit(int m0, int u, Unit& v) const {
    for_each_pair(m0, u, [&](int r, int col, int ss, int h, int half) {
      float2 x = make_float2(0.f, 0.f);
      if (r < tile_rows) x = __ldcs(reinterpret_cast<const float2*>(S + static_cast<int64_t>(r) * N + col));
      v[ss][h][2 * half] = x.x, v[ss][h][2 * half + 1] = x.y;
    });
  }

  __device__ __forceinline__ void store_unit(int m0, int u, const Unit& v) const {
    for_each_pair(m0, u, [&](int r, int col, int ss, int h, int half) {
      if (r < tile_rows)
        __stcs(reinterpret_cast<float2*>(S + static_cast<int64_t>(r) * N + col),
               make_float2(v[ss][h][2 * half], v[ss][h][2 * half + 1]));
    });
  }

  // The fold of unit u of the tile at row m0, in place: v = c0 v + X B over the unit's columns.
  __device__ __forceinline__ void fold_unit(int m0, int u, const MmaFold& f, Unit& v) const {
    const int lane = threadIdx.x & 31, t = lane & 3;
    const int mat = lane >> 3, mat_row = lane & 7;  // the ldmatrix row this lane addresses
    // The head of the tile's rows (a tile never straddles heads).
    const int hh = head_of_row<kHeads>(m0, plen);
    const float c0 = f.c0[hh];
#pragma unroll
    for (int ss = 0; ss < kStepsPerUnit; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[ss][h][e] *= c0;
    const float* const w = f.fold_w + hh * f.w_stride;
    const int pa = m0 - hh * plen + (mat & 1) * 8;  // matrix rows: 8 rows of the head's chunk
    const bool rows_in = m0 + (mat & 1) * 8 < tile_rows;
    for (int jb = 0; jb < f.hist; jb += 16) {
      // A: matrix m holds tile rows (m & 1) * 8 .. and entries jb + (m >> 1) * 8 .. of the [j][row]
      // tile, transposed into the row-major A fragment: register m has row g (+ 8 for odd m),
      // entries jb + (m >> 1) * 8 + 2t, +1.
      const int ja = jb + (mat >> 1) * 8 + mat_row;
      uint32_t araw[4];
      ldmatrix_x4_trans(araw, ja < f.hist && rows_in ? f.x_raw + static_cast<int64_t>(hh * f.R + ja) * f.ldx + pa
                                                     : f.zeros);
      uint32_t a_hi[4], a_mid[4], a_lo[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int j = jb + (m >> 1) * 8 + 2 * t;
        const float w0 = j < f.hist ? w[j] : 0.f, w1 = j + 1 < f.hist ? w[j + 1] : 0.f;
        __nv_bfloat162 x2;
        memcpy(&x2, &araw[m], 4);
        const float2 x = __bfloat1622float2(x2);
        split_bf16x3(x.x * w0, x.y * w1, a_hi[m], a_mid[m], a_lo[m]);
      }
#pragma unroll
      for (int ss = 0; ss < kStepsPerUnit; ++ss) {
        // B: matrix m holds entries jb + (m & 1) * 8 .. and columns (m >> 1) * 8 .. of the
        // k-step's 16: registers 0, 1 are n-tile 0's fragment, 2, 3 n-tile 1's.
        const int jk = jb + (mat & 1) * 8 + mat_row;
        const int col = 16 * (u * kStepsPerUnit + ss) + (mat >> 1) * 8;
        uint32_t b[4];
        ldmatrix_x4_trans(b, jk < f.hist ? f.b_raw + static_cast<int64_t>(jk) * f.ldb + col : f.zeros);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Smallest terms first: the accumulator then meets them before it grows.
          mma_bf16_16816(v[ss][h], a_lo, b[2 * h], b[2 * h + 1]);
          mma_bf16_16816(v[ss][h], a_mid, b[2 * h], b[2 * h + 1]);
          mma_bf16_16816(v[ss][h], a_hi, b[2 * h], b[2 * h + 1]);
        }
      }
    }
  }

  // The whole 16-row tile at row m0 (contiguous in the state: rows of N floats), asked of L2 by one
  // bulk prefetch from lane 0 when the tile's first unit is loaded. The registers hold one unit
  // (2 KB per warp) in flight, and a CTA spends much of its life in the prologue and the outputs
  // with nothing else in flight (ncu, Mamba-2 nano T = 8 non-flush: 50 % of DRAM bandwidth, a third
  // of the warp samples before the stream); the prefetch keeps the rest of the tile coming. H200,
  // Mamba-2 batch 256, B = 16, all accepted, same build: nano T = 8 623.9 -> 591.8 us, super 665.3 ->
  // 637.3. Two units in flight instead (4 KB per warp) lost 3 % (nano T = 8 559.6 -> 577.6, session
  // 17). (Whole-tile prefetches at the CTA's start slowed the decode kernels: replay_kernel.cuh.)
  __device__ __forceinline__ void prefetch_tile(int m0) const {
    if ((threadIdx.x & 31) == 0 && m0 < tile_rows)
      prefetch_l2_bulk(S + static_cast<int64_t>(m0) * N,
                       static_cast<uint32_t>(min(kMmaTileRows, tile_rows - m0) * N * sizeof(float)));
  }

  // cur: this warp's first unit, loaded as soon as the slot is known.
  __device__ __forceinline__ void first_unit(Unit& cur) const {
    const int m0 = (threadIdx.x >> 5) * kMmaTileRows;
    prefetch_tile(m0);
    if (m0 < tile_rows) load_unit(m0, 0, cur);
  }

  // The whole stream of this warp: tiles warp, warp + kWarps, ... of 16 rows; for each, the fold
  // (flush rows) and the state write, then the family's products of its rows:
  //   products.begin() before a tile's first unit, products.unit(u, v) for each unit u of the tile
  //   (v: the unit after the fold), products.end(m0) after its last.
  // One unit in flight ahead of the one being worked on, across tile boundaries, and each tile's
  // other units on their way to L2 (prefetch_tile).
  template <typename Products>
  __device__ __forceinline__ void run(Unit& cur, const MmaFold& f, Products& products) const {
    const int warp = threadIdx.x >> 5;
    constexpr int kStride = kWarps * kMmaTileRows;
    Unit nxt;
    for (int m0 = warp * kMmaTileRows; m0 < tile_rows; m0 += kStride) {
      products.begin();
      // Not unrolled: a unit's work is the same at every u but for its columns, and unrolled the
      // inlined fold of every unit kept more of its operands live (ptxas, Mamba-2, when the stream
      // was also built for T = 4: 36-40 bytes of spill at its 80 registers).
#pragma unroll 1
      for (int u = 0; u < kUnits; ++u) {
        if (u + 1 < kUnits)
          load_unit(m0, u + 1, nxt);
        else if (m0 + kStride < tile_rows) {
          prefetch_tile(m0 + kStride);
          load_unit(m0 + kStride, 0, nxt);
        }
        if (f.active) {
          fold_unit(m0, u, f, cur);
          store_unit(m0, u, cur);
        }
        products.unit(u, cur);
#pragma unroll
        for (int ss = 0; ss < kStepsPerUnit; ++ss)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) cur[ss][h][e] = nxt[ss][h][e];
      }
      products.end(m0);
    }
  }
};

// The A fragments of k-step ss of unit v (rows g, g + 8; k pairs 2t.. and 2t + 8..), each fp32 value
// split into two bf16 terms: register order row g k 2t.., row g + 8 k 2t.., row g k 2t + 8..,
// row g + 8 k 2t + 8...
template <typename Unit>
__device__ __forceinline__ void mma_state_a_split(const Unit& v, int ss, uint32_t (&a_hi)[4], uint32_t (&a_lo)[4]) {
  split_bf16x2(v[ss][0][0], v[ss][0][1], a_hi[0], a_lo[0]);
  split_bf16x2(v[ss][0][2], v[ss][0][3], a_hi[1], a_lo[1]);
  split_bf16x2(v[ss][1][0], v[ss][1][1], a_hi[2], a_lo[2]);
  split_bf16x2(v[ss][1][2], v[ss][1][3], a_hi[3], a_lo[3]);
}

}  // namespace replayssm
