// The Mamba-2 spec verify's state stream on tensor cores (mamba2_spec_verify with an fp32
// checkpoint, bf16 activations and the 8-token window tile, T = 5..8; spec_kernel.cuh's kMma).
//
// Why: the CUDA-core stream (TileStream) gives every state element kT FMAs with the window's C
// vectors plus its share of the lane reductions, and a flush row's fold hist more FMAs with five
// shared-memory loads per 16 of them; at T = 8 that work, not the bytes, sets the step's time
// (nano batch 256: 760 us at 52 % of copy bandwidth; docs/perf-notes.md). Here each warp streams
// whole 16-row tiles of the CTA's state rows straight from global memory into the registers of
// mma.sync m16n8k16 fragments (MmaStateStream, common/mma_state_stream.cuh, which also folds flush
// rows in place), so nothing goes through shared memory. The products (SpecMmaProducts): A = the
// tile's state (16 rows x 16 columns per k-step, each fp32 value split into two bf16 terms, hi +
// lo, within 2^-17 of it), B = the window's C vectors (exact in bf16: the activations are bf16;
// token g of the n-tile is output column g), two mma per k-step into an accumulator that ends as
// the tile's 16 x 8 dot products. The fold's x_j and B_j are staged with a row stride padded by 16
// bytes (SpecSmem, ldmatrix_row_stride) for its ldmatrix reads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/common/mma_state_stream.cuh"

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

// Rows of P per CTA chunk are whole 16-row tiles (choose_p_chunk's unit for these instances).
constexpr int kSpecMmaTileRows = kMmaTileRows;

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
using SpecMmaStream = MmaStateStream<N, kWarps, kHeads>;

// The products MmaStateStream::run takes of each unit: the tile's rows against the window's C
// tile, c_tile[i * ldc + col] (bf16, 8 token rows, zero past n), read as the B fragments (ldmatrix,
// one per unit), into dot[i * tile_rows + row] for tokens i < n.
struct SpecMmaProducts {
  const __nv_bfloat16* c_tile;
  int ldc;
  int n;
  float* dot;
  int tile_rows;
  float acc_hi[4], acc_lo[4];

  __device__ __forceinline__ void begin() {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_hi[e] = 0.f, acc_lo[e] = 0.f;
  }

  template <typename Unit>
  __device__ __forceinline__ void unit(int u, const Unit& cur) {
    const int lane = threadIdx.x & 31;
    // B: matrix m holds tokens 0..7 and columns 32 u + 8 m ..: registers 0, 1 are k-step 2u's
    // fragment (token g, columns 2t, +1 and 8 + 2t, +1 of its 16), 2, 3 k-step 2u + 1's.
    uint32_t cb[4];
    ldmatrix_x4(cb, c_tile + (lane & 7) * ldc + 32 * u + (lane >> 3) * 8);
#pragma unroll
    for (int ss = 0; ss < 2; ++ss) {
      uint32_t a_hi[4], a_lo[4];
      mma_state_a_split(cur, ss, a_hi, a_lo);
      mma_bf16_16816(acc_lo, a_lo, cb[2 * ss], cb[2 * ss + 1]);
      mma_bf16_16816(acc_hi, a_hi, cb[2 * ss], cb[2 * ss + 1]);
    }
  }

  __device__ __forceinline__ void end(int m0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    // Accumulator element e: row g (e < 2) or g + 8, token 2t + (e & 1).
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = m0 + g + (e >> 1) * 8, i = 2 * t + (e & 1);
      if (r < tile_rows && i < n) dot[i * tile_rows + r] = acc_lo[e] + acc_hi[e];
    }
  }
};

}  // namespace replayssm::mamba2
