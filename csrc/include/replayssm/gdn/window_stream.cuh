// The GDN window kernel's state stream through registers (gdn_window_kernel's kRegStream): the
// spec verify with an fp32 checkpoint and bf16 activations at the 8-token window tile.
//
// Why: the staged stream (cp.async chunks of 8 KB into shared memory, window_mma.cuh) splits each
// chunk's columns over the CTA's four warps, so every chunk costs a barrier and a pass that sums
// the warps' partial products; session 16's ncu (Qwen3.5-4B, T = 4 pairs) found the kernel waiting
// on those chains (46 % of DRAM peak at 4 warps per scheduler, 12 % of the samples at barriers),
// and at T = 8 (16 outputs per row, three stage buffers) the staged kernel ran 1.39x the seed's.
// Here each warp streams whole 16-row tiles of the CTA's rows into mma fragments with no barrier
// and no partial sums (MmaStateStream, common/mma_state_stream.cuh, the stream of the Mamba-2 spec
// kernel at T = 8, which also folds a flush row in place on the tensor cores: S_base = e^Gh S0 +
// sum_j (e^(Gh - Gh_j) u_j) k_j^T is its c0 S + X B with X = the ring's u_j and B = its k_j), and
// the stage buffers and partial sums leave shared memory.
//
// The products of a tile with the window: A = the state (fp32 split into two bf16 terms), B = the
// 2 kT window vectors k̂_0 .. k̂_{kT-1}, q̂_0 .. q̂_{kT-1} (fp32, also split: hi = bf16(w), lo =
// bf16(w - hi)), three mma per k-step and n-tile (lo.hi and hi.lo into one accumulator, hi.hi into
// another), as the staged path's WindowMma.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/common/mma_state_stream.cuh"

namespace replayssm::gdn {

// The instances built with the register stream: the spec verify (kSpec) with an fp32 checkpoint
// and bf16 activations at the 8-token window tile (T = 5..8). H200, B = 16, all accepted, one
// build, stage buffers -> registers (REPLAYSSM_GDN_SPEC_REGS 0 / 1, two processes each, mean;
// session 18):
//   T = 8: Qwen3.5-4B batch 64 125.3 -> 111.6 us, batch 256 450.6 -> 407.2, batch 512 891.1 ->
//          786.6; Qwen3.5-122B batch 64 232.5 -> 213.7, batch 256 881.6 -> 783.2, batch 512
//          1755.4 -> 1525.9 (9-13 % faster);
//   T = 4 (v-head pairs, built for 5 CTAs per SM): 4B batch 64 71.5 -> 79.0, batch 256 261.4 ->
//          261.3, batch 512 503.0 -> 492.3; 122B batch 64 136.8 -> 143.3, batch 256 500.3 -> 486.5
//          (10 % slower at batch 64 to 3 % faster at 256), so the 4-token tile keeps the stage
//          buffers and no pair instance takes registers.
// The launcher also needs the CTA's rows to fit the tiles (window_reg_stream_fits) and takes the
// stream only where every warp holds a tile (window_reg_stream).
template <bool kSpec, int kT, typename ST, typename AT>
constexpr bool kWindowRegStreamBuilt =
    kSpec && kT == 8 && std::is_same_v<ST, float> && std::is_same_v<AT, __nv_bfloat16>;

// Floats of shared memory for the two split tiles (hi, lo) of rows window vectors of K columns.
__host__ __device__ inline int window_split_floats(int rows, int K) { return rows * ldmatrix_row_stride(K); }

// The window's rows vectors (fp32, [rows][K] at win) as bf16 hi and lo rows (split_bf16x2, a
// column pair per step: K and the row stride are even, so the pairs are 4-byte aligned); every
// thread a share.
template <int K, int kThreads>
__device__ __forceinline__ void window_split_stage(const float* win, int rows, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  const int ld = ldmatrix_row_stride(K);
  for (int idx = 2 * threadIdx.x; idx < rows * K; idx += 2 * kThreads) {
    const int m = idx / K, c = idx % K;
    const float2 w = *reinterpret_cast<const float2*>(win + idx);
    uint32_t h, l;
    split_bf16x2_packed(w.x, w.y, h, l);
    *reinterpret_cast<uint32_t*>(hi + m * ld + c) = h;
    *reinterpret_cast<uint32_t*>(lo + m * ld + c) = l;
  }
}

// The products MmaStateStream::run takes of each unit, and where they go: output m of row r (m <
// kT: k̂_m, else q̂_{m - kT}) into sk / sq [i][rows] for tokens i < n, as the staged path's finish
// pass: S_base itself on a folded row, e^Gh (S0 . w) + the history terms already there otherwise.
template <int kT, int kHeads>
struct WindowStreamProducts {
  static constexpr int kDots = 2 * kT;
  static constexpr int kNTiles = kDots / 8;
  static_assert(kDots % 8 == 0, "whole n-tiles of window vectors (kT >= 4)");

  const __nv_bfloat16* win_hi;  // [kDots][ld]
  const __nv_bfloat16* win_lo;
  int ld;
  int n;                        // the row's tokens
  float* sk;                    // [i][rows]
  float* sq;
  int rows;                     // kHeads * plen
  int plen;                     // rows of each head
  bool folded;                  // flush row: the stream's state is S_base
  const float* eGh;             // [heads]
  float acc_big[kNTiles][4], acc_small[kNTiles][4];

  __device__ __forceinline__ void begin() {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_big[nt][e] = 0.f, acc_small[nt][e] = 0.f;
  }

  template <typename Unit>
  __device__ __forceinline__ void unit(int u, const Unit& cur) {
    const int lane = threadIdx.x & 31;
    // B: matrix m of n-tile nt holds window rows 8 nt .. 8 nt + 7 and columns 32 u + 8 m ..:
    // registers 0, 1 are k-step 2u's fragment, 2, 3 k-step 2u + 1's.
    uint32_t b_hi[kNTiles][4], b_lo[kNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int at = (8 * nt + (lane & 7)) * ld + 32 * u + (lane >> 3) * 8;
      ldmatrix_x4(b_hi[nt], win_hi + at);
      ldmatrix_x4(b_lo[nt], win_lo + at);
    }
#pragma unroll
    for (int ss = 0; ss < 2; ++ss) {
      uint32_t a_hi[4], a_lo[4];
      mma_state_a_split(cur, ss, a_hi, a_lo);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        mma_bf16_16816(acc_small[nt], a_lo, b_hi[nt][2 * ss], b_hi[nt][2 * ss + 1]);
        mma_bf16_16816(acc_small[nt], a_hi, b_lo[nt][2 * ss], b_lo[nt][2 * ss + 1]);
        mma_bf16_16816(acc_big[nt], a_hi, b_hi[nt][2 * ss], b_hi[nt][2 * ss + 1]);
      }
    }
  }

  __device__ __forceinline__ void end(int m0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float scale = eGh[head_of_row<kHeads>(m0, plen)];
    // Accumulator element e of n-tile nt: row g (e < 2) or g + 8, output 8 nt + 2t + (e & 1).
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + (e >> 1) * 8, m = 8 * nt + 2 * t + (e & 1);
        const int i = m < kT ? m : m - kT;
        if (r < rows && i < n) {
          float* const dst = (m < kT ? sk : sq) + i * rows + r;
          const float x = acc_small[nt][e] + acc_big[nt][e];
          *dst = folded ? x : scale * x + *dst;
        }
      }
  }
};

}  // namespace replayssm::gdn
