// The Mamba-2 spec verify's state stream on tensor cores (mamba2_spec_verify with an fp32
// checkpoint, bf16 activations and the 8-token window tile, T = 5..8; spec_kernel.cuh's kMma).
//
// Why: the CUDA-core stream (TileStream) gives every state element kT FMAs with the window's C
// vectors plus its share of the lane reductions, and a flush row's fold hist more FMAs with five
// shared-memory loads per 16 of them; at T = 8 that work, not the bytes, sets the step's time
// (nano batch 256: 760 us at 52 % of copy bandwidth; docs/perf-notes.md). Here each warp streams
// whole 16-row tiles of the CTA's state rows straight from global memory into the registers of
// mma.sync m16n8k16 fragments, so nothing goes through shared memory:
//   - the products: A = the tile's state (16 rows x 16 columns per k-step, each fp32 value split
//     into two bf16 terms, hi + lo, within 2^-17 of it), B = the window's C vectors (exact in
//     bf16: the activations are bf16; token g of the n-tile is output column g), two mma per k-step
//     into an accumulator that ends as the tile's 16 x 8 dot products;
//   - a flush row's fold: acc = c0 S + X B with A = X (the tile's 16 rows x 16 history entries of
//     s_j x_j[p], each split into three bf16 terms whose sum is exact) and B = the history's B_j
//     (exact bf16), three mma per n-tile and 16 entries, accumulated on top of c0 S in the very
//     registers the state was loaded into: the accumulator layout of an n-tile pair (lane (g, t):
//     rows g and g + 8, columns 2t, 2t + 1 of each 8-column n-tile) is the A layout of the
//     products' k-step (k pairs {2t, 2t + 1} and {2t + 8, 2t + 9} of its 16 columns).
// A lane therefore loads 8 bytes per row and n-tile: rows g and g + 8, columns 16 s + 2t and
// 16 s + 8 + 2t of k-step s; a warp's load covers 8 rows x 32 contiguous bytes, whole sectors.
// The fold's operands come from the staged entries by ldmatrix.trans: x_j as [j][p] rows and B_j
// as [j][n] rows, both with a row stride padded by 16 bytes (SpecSmem) so that the 8 rows of one
// ldmatrix matrix fall in distinct bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/mma_bf16.cuh"

namespace replayssm::mamba2 {

// The instances that take the tensor-core stream: an fp32 checkpoint (split for the products,
// exact accumulator of the fold), bf16 activations (the C and B_j operands exact), the 8-token
// window tile (T = 5..8), N in whole units of two k-steps. H200, batch 256, B = 16, all accepted,
// same run: at T = 8 the tensor cores take nano 766.9 -> 619.7 us and super 813.6 -> 660.0, but
// at T = 4 they lose (nano 429.4 -> 464.5, super 475.2 -> 496.6): four products per state element
// do not pay for the split into two bf16 terms and the fragment traffic. Four heads per CTA do not
// change that (session 13, same build, batch 256, cuda-core pairs -> tensor-core quads: nano 428.5
// -> 432.2, super 474.8 -> 475.5, nano batch 512 848.0 -> 860.0). The launcher also requires, at
// run time, P % 16 == 0 (tiles never straddle a head, the fold's ldmatrix rows stay 16-byte
// aligned) and a 16-byte aligned state view (spec_mma_choice).
template <typename Act, typename St, int N, int kT>
constexpr bool kSpecMma =
    std::is_same_v<St, float> && std::is_same_v<Act, __nv_bfloat16> && kT == 8 && N % 32 == 0;

// The head (0 .. kHeads - 1) of CTA row pl of kHeads heads of plen rows each, without a division.
template <int kHeads>
__host__ __device__ __forceinline__ int head_of_row(int pl, int plen) {
  int hh = 0;
#pragma unroll
  for (int k = 1; k < kHeads; ++k) hh += pl >= k * plen ? 1 : 0;
  return hh;
}

// Rows of P per CTA chunk are whole 16-row tiles (choose_p_chunk's unit for these instances).
constexpr int kSpecMmaTileRows = 16;

// Row stride, in elements, of a staged [entry][columns] bf16 tile that ldmatrix reads 8 rows of
// at a time: one 16-byte piece more than the columns, so consecutive rows start 4 banks apart.
__host__ __device__ inline int spec_mma_stride(int cols) { return cols + 8; }

// The window's C vectors as bf16 rows for the products' B fragments: c_tile[i * ldc + col] = C of
// token i (zero for i >= n), 8 rows, every thread of the CTA a share.
template <int N, int kThreads>
__device__ __forceinline__ void spec_mma_stage_c(const __nv_bfloat16* C_in, int64_t C_stride, int n,
                                                 __nv_bfloat16* c_tile, int ldc) {
  for (int e = threadIdx.x; e < 8 * N; e += kThreads) {
    const int i = e / N, col = e % N;
    c_tile[i * ldc + col] = i < n ? C_in[static_cast<int64_t>(i) * C_stride + col] : __float2bfloat16_rn(0.f);
  }
}

// Everything the fold reads besides the state.
struct SpecMmaFold {
  bool active;                   // a flush row with history: fold, then store the state
  int hist;                      // entries folded (entries 0 .. hist-1)
  int R;                         // ring length: head hh's weights at fold_w + hh R
  const float* c0;               // [heads]: the decay of the checkpoint
  const float* fold_w;           // [heads][R]: s_j
  const __nv_bfloat16* x_raw;    // [heads][R][ldx]: x_j of the CTA's P chunk
  int ldx;
  const __nv_bfloat16* b_raw;    // [R][ldb]: B_j of the group
  int ldb;
  const __nv_bfloat16* zeros;    // 16 zero bytes: the ldmatrix rows past the history or the tile
};

// B_k . C_i of the entries e0 <= k < n_ent (the group's, for every token i < kT) as mma: A = the
// staged B_k rows (16 entries x 16 columns per k-step, exact bf16, ldmatrix), B = the C tile;
// warp w takes the entry tiles e0 + 16 w, e0 + 16 (w + kWarps), ... into bc[k * kT + i].
template <int N, int kWarps, int kT>
__device__ __forceinline__ void spec_mma_bc(const __nv_bfloat16* b_raw, int ldb, const __nv_bfloat16* c_tile, int ldc,
                                            const __nv_bfloat16* zeros, int e0, int n_ent, float* bc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3, mat = lane >> 3, mat_row = lane & 7;
  for (int jb = e0 + 16 * warp; jb < n_ent; jb += 16 * kWarps) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    // Matrix m of the A load: entries jb + (m & 1) * 8 .., columns (m >> 1) * 8 .. of the k-step:
    // register m is the A fragment's register m (rows g, g + 8; k pairs 2t and 8 + 2t).
    const int ja = jb + (mat & 1) * 8 + mat_row;
    const __nv_bfloat16* const a_row = ja < n_ent ? b_raw + static_cast<int64_t>(ja) * ldb + (mat >> 1) * 8 : zeros;
#pragma unroll
    for (int u = 0; u < N / 32; ++u) {
      uint32_t cb[4];
      ldmatrix_x4(cb, c_tile + (lane & 7) * ldc + 32 * u + (lane >> 3) * 8);
#pragma unroll
      for (int ss = 0; ss < 2; ++ss) {
        uint32_t a[4];
        ldmatrix_x4(a, ja < n_ent ? a_row + 32 * u + 16 * ss : zeros);
        mma_bf16_16816(acc, a, cb[2 * ss], cb[2 * ss + 1]);
      }
    }
    // Accumulator element e: entry jb + g (e < 2) or jb + g + 8, token 2t + (e & 1).
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = jb + g + (e >> 1) * 8, i = 2 * t + (e & 1);
      if (j < n_ent && i < kT) bc[j * kT + i] = acc[e];
    }
  }
}

template <int N, int kWarps, int kHeads>
struct SpecMmaStream {
  static constexpr int kKSteps = N / 16;
  static constexpr int kStepsPerUnit = 2;  // k-steps loaded together: 16 floats per lane, as TileStream's
  static constexpr int kUnits = kKSteps / kStepsPerUnit;
  static_assert(N % 32 == 0, "whole units of two k-steps");
  // One unit of a lane's state values in the accumulator layout of its n-tiles: [k-step][n-tile h
  // of the k-step][e], e = 0, 1: row g, columns 16 s + 8 h + 2t, +1; e = 2, 3: row g + 8.
  using Unit = float[kStepsPerUnit][2][4];

  float* S;        // row r of the CTA's tile at S + r N (16-byte aligned)
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
  __device__ __forceinline__ void fold_unit(int m0, int u, const SpecMmaFold& f, Unit& v) const {
    const int lane = threadIdx.x & 31, t = lane & 3;
    const int mat = lane >> 3, mat_row = lane & 7;  // the ldmatrix row this lane addresses
    // The head of the tile's rows (a tile never straddles heads: P % 16 == 0).
    const int hh = head_of_row<kHeads>(m0, plen);
    const float c0 = f.c0[hh];
#pragma unroll
    for (int ss = 0; ss < kStepsPerUnit; ++ss)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[ss][h][e] *= c0;
    const float* const w = f.fold_w + hh * f.R;
    const int pa = m0 - hh * plen + (mat & 1) * 8;  // matrix rows: 8 rows of the head's P chunk
    const bool rows_in = m0 + (mat & 1) * 8 < tile_rows;
    for (int jb = 0; jb < f.hist; jb += 16) {
      // A: matrix m holds tile rows (m & 1) * 8 .. and entries jb + (m >> 1) * 8 .. of the [j][p]
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
  // with nothing else in flight (ncu, nano T = 8 non-flush: 50 % of DRAM bandwidth, a third of the
  // warp samples before the stream); the prefetch keeps the rest of the tile coming. H200, batch
  // 256, B = 16, all accepted, same build: nano T = 8 623.9 -> 591.8 us, super 665.3 -> 637.3.
  // (Whole-tile prefetches at the CTA's start slowed the decode kernels: replay_kernel.cuh.)
  __device__ __forceinline__ void prefetch_tile(int m0) const {
    if ((threadIdx.x & 31) == 0 && m0 < tile_rows)
      prefetch_l2_bulk(S + static_cast<int64_t>(m0) * N,
                       static_cast<uint32_t>(min(16, tile_rows - m0) * N * sizeof(float)));
  }

  // cur: this warp's first unit, loaded as soon as the slot is known.
  __device__ __forceinline__ void first_unit(Unit& cur) const {
    const int m0 = (threadIdx.x >> 5) * 16;
    prefetch_tile(m0);
    if (m0 < tile_rows) load_unit(m0, 0, cur);
  }

  // The whole stream of this warp: tiles warp, warp + kWarps, ... of 16 rows; for each, the fold
  // (flush rows) and the state write, then the dot products of its rows with the n window tokens
  // into dot[i * tile_rows + row]. One unit in flight ahead of the one being worked on, across
  // tile boundaries, and each tile's other units on their way to L2 (prefetch_tile). c_tile: the
  // window's C as [token][ldc] bf16 rows (8 rows, zero past n), read as the products' B fragments
  // (ldmatrix, one per unit).
  __device__ __forceinline__ void run(Unit& cur, const __nv_bfloat16* c_tile, int ldc, const SpecMmaFold& f, int n,
                                      float* dot) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    constexpr int kStride = kWarps * 16;
    Unit nxt;
    for (int m0 = warp * 16; m0 < tile_rows; m0 += kStride) {
      float acc_hi[4] = {0.f, 0.f, 0.f, 0.f}, acc_lo[4] = {0.f, 0.f, 0.f, 0.f};
      // Not unrolled: a unit's work is the same at every u but for its columns, and unrolled the
      // inlined fold of every unit kept more of its operands live (ptxas, when the stream was also
      // built for T = 4: 36-40 bytes of spill at its 80 registers).
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
        // B: matrix m holds tokens 0..7 and columns 32 u + 8 m ..: registers 0, 1 are k-step 2u's
        // fragment (token g, columns 2t, +1 and 8 + 2t, +1 of its 16), 2, 3 k-step 2u + 1's.
        uint32_t cb[4];
        ldmatrix_x4(cb, c_tile + (lane & 7) * ldc + 32 * u + (lane >> 3) * 8);
#pragma unroll
        for (int ss = 0; ss < kStepsPerUnit; ++ss) {
          // A register order: row g k 2t.., row g + 8 k 2t.., row g k 2t + 8.., row g + 8 k 2t + 8..
          uint32_t a_hi[4], a_lo[4];
          split_bf16x2(cur[ss][0][0], cur[ss][0][1], a_hi[0], a_lo[0]);
          split_bf16x2(cur[ss][0][2], cur[ss][0][3], a_hi[1], a_lo[1]);
          split_bf16x2(cur[ss][1][0], cur[ss][1][1], a_hi[2], a_lo[2]);
          split_bf16x2(cur[ss][1][2], cur[ss][1][3], a_hi[3], a_lo[3]);
          mma_bf16_16816(acc_lo, a_lo, cb[2 * ss], cb[2 * ss + 1]);
          mma_bf16_16816(acc_hi, a_hi, cb[2 * ss], cb[2 * ss + 1]);
        }
#pragma unroll
        for (int ss = 0; ss < kStepsPerUnit; ++ss)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) cur[ss][h][e] = nxt[ss][h][e];
      }
      // Accumulator element e: row g (e < 2) or g + 8, token 2t + (e & 1).
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + (e >> 1) * 8, i = 2 * t + (e & 1);
        if (r < tile_rows && i < n) dot[i * tile_rows + r] = acc_lo[e] + acc_hi[e];
      }
    }
  }
};

}  // namespace replayssm::mamba2
