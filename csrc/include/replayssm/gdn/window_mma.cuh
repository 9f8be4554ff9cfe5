// The spec verify's window products on tensor cores: for every state row v of a stage chunk and
// every window vector m < kOut (k̂_0 .. k̂_{kT-1}, then q̂_0 .. q̂_{kT-1}), sum_k S[v][k] W[m][k].
// On the CUDA cores each state row took 2 kT dot products of K elements, every window element
// read again from shared memory for every row group: at T = 4 that per-row work, not the state
// stream, set the verify step's time (ncu: 52 % of the stall samples in it, 33 % of DRAM
// bandwidth). Here a chunk of state rows is the A operand of mma.sync m16n8k16 (16 rows, 16 k) and
// the window vectors are B (16 k, n = 8 outputs), both fp32 split into two bf16 terms (hi =
// bf16(x), lo = bf16(x - hi): x to 2^-17 |x|); a product is lo.hi + hi.lo + hi.hi (lo.lo is below
// 2^-17 of it), three mma per 16 k, within ~2^-16 relative: far below the act-dtype rounding of the
// outputs and ring entries these products feed. Session 5 ran 3xTF32 (m16n8k8, six mma per 16 k);
// the bf16 split halves the tensor-pipe instructions for one more ALU instruction per value of A,
// and ran Qwen3.5-4B batch 256 T = 4 / 8 at 271.6 / 468.2 µs against 277.9 / 493.1 in one run.
//
// The state chunk is fp32 in the swizzled stage layout (kSwizzleRows). Warp w takes the columns
// [w K / 4, (w + 1) K / 4) of every row, so the four warps' partial sums of a (row, output) pair
// meet in shared memory (`part`, summed in a fixed order: the result does not depend on timing).
//
// Which columns a lane reads: an mma step sums over its 16 k in any order as long as A and B use
// the same one, so the k pairs {2t, 2t + 1} and {2t + 8, 2t + 9} that lane (g, t) supplies are
// taken to be one whole 16-byte piece: in a block of 4 kHalves pieces, k-step h of the block takes
// piece kHalves t + h of its rows (g and g + 8) and of its output row g. With the swizzle, the 8
// lanes of one shared-memory phase (rows g = 2q and 2q + 1) then read 8 distinct bank groups. K =
// 64 leaves a warp 4 pieces: one k-step, one piece per lane.
//
// A bf16 checkpoint takes WindowMmaBf16 (below): bf16 mma with the state rows as exact operands.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/gdn/chunk_ops.cuh"

namespace replayssm::gdn {

// The partial sums both forms leave, one chunk of `rows` rows: per warp and row kOutPad floats
// (kOut rounded up to whole n-tiles of 8), the output index XORed with an even key of the row
// (slot). The reader (the kernel's finish pass) takes one output of 16 consecutive rows per
// half-warp: unkeyed, rows 4 apart (kOutPad 8) or 2 apart (16) share a bank, and ncu counted 4
// wavefronts per read (Qwen3.5-4B T = 4, session 16: 4.4 M of the launch's 20.6 M shared
// wavefronts). With the key those rows land on distinct banks, and the writers' float2 pairs
// (outputs 2t, 2t + 1) stay adjacent and 8-byte aligned because the key is even. H200, same run
// (session 17), Qwen3.5-4B batch 256: T = 8 cycle 477.2 -> 453.6 us (16 outputs: 8 wavefronts per
// read unkeyed), T = 4 262.7 -> 261.9, T = 2 unchanged.
template <int kOut>
struct WindowPartials {
  static_assert(kOut >= 2 && kOut <= 16, "kOut: 2 kT outputs, kT <= 8");
  static constexpr int kNTiles = (kOut + 7) / 8;
  static constexpr int kOutPad = 8 * kNTiles;
  static constexpr int kRowsPerBankRow = 32 / kOutPad;  // rows whose partials fill one 32-bank row

  // Floats of `part` for one chunk of `rows` rows.
  __host__ __device__ static constexpr int part_floats(int rows) { return kWarps * rows * kOutPad; }

  // The key of chunk row r; it repeats every 16 rows, so rows m0 + g of an m0 multiple of 16 (the
  // writers' mma tiles) take g's.
  static __device__ __forceinline__ int key(int r) { return ((r / kRowsPerBankRow) & (kOutPad / 2 - 1)) << 1; }
  // Where warp w's partial of chunk row r and output m sits, given key(r).
  static __device__ __forceinline__ int slot(int rows, int w, int r, int m, int row_key) {
    return (w * rows + r) * kOutPad + (m ^ row_key);
  }

  // The product of chunk row r and output m: the warps' partials summed in warp order.
  static __device__ __forceinline__ float total(const float* part, int rows, int r, int m) {
    float x = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) x += part[slot(rows, w, r, m, key(r))];
    return x;
  }
};

template <int K, int kOut>
struct WindowMma : WindowPartials<kOut> {
  using WindowPartials<kOut>::kNTiles;
  using WindowPartials<kOut>::kOutPad;
  static constexpr int kWarpPieces = K / 4 / kWarps;        // 16-byte pieces (4 fp32) of a row per warp
  static constexpr int kHalves = kWarpPieces >= 8 ? 2 : 1;  // k-steps per lane and block
  static constexpr int kBlockPieces = 4 * kHalves;
  static constexpr int kBlocks = kWarpPieces / kBlockPieces;
  static constexpr int kSteps = kBlocks * kHalves;
  static_assert(K == 64 || K == 128 || K == 256, "K must be 64, 128 or 256");

  // First column / 4 of this lane's k-step h of block b.
  static __device__ __forceinline__ int piece(int warp, int b, int t, int h) {
    return warp * kWarpPieces + b * kBlockPieces + kHalves * t + h;
  }

  // Four fp32 values as the hi and lo bf16 pairs of the k pairs {0, 1} and {2, 3}.
  static __device__ __forceinline__ void split4(const float4& x, uint32_t (&hi)[2], uint32_t (&lo)[2]) {
    split_bf16x2_packed(x.x, x.y, hi[0], lo[0]);
    split_bf16x2_packed(x.z, x.w, hi[1], lo[1]);
  }

  // The B fragments, held in registers over the whole stream (kNTiles * kSteps * 4 <= 32 of them).
  struct BFrags {
    uint32_t hi[kNTiles][kSteps][2], lo[kNTiles][kSteps][2];
  };

  // This lane's B operand: output row m = 8 nt + g of the window (zeros past kOut), split.
  static __device__ __forceinline__ void load_all_b(const float* s_win, int warp, int lane, BFrags& f) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int m = nt * 8 + g;
#pragma unroll
      for (int b = 0; b < kBlocks; ++b)
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          float4 w = make_float4(0.f, 0.f, 0.f, 0.f);
          if (m < kOut) w = *reinterpret_cast<const float4*>(s_win + m * K + 4 * piece(warp, b, t, h));
          split4(w, f.hi[nt][b * kHalves + h], f.lo[nt][b * kHalves + h]);
        }
    }
  }

  // This warp's partial products of the chunk's `rows` rows (swizzled stage layout) into part
  // (WindowPartials::slot).
  static __device__ __forceinline__ void chunk(const float* buf, int rows, const BFrags& f, float* part) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int key_g = WindowPartials<kOut>::key(g), key_g8 = WindowPartials<kOut>::key(g + 8);
    for (int m0 = 0; m0 < rows; m0 += 16) {
      const bool lower = m0 + g < rows, upper = m0 + g + 8 < rows;  // this lane's two rows exist
      // One accumulator per product term (lo.hi, hi.lo, hi.hi): three independent mma chains.
      float acc[kNTiles][3][4];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int c = 0; c < 3; ++c) acc[nt][c][0] = acc[nt][c][1] = acc[nt][c][2] = acc[nt][c][3] = 0.f;
#pragma unroll
      for (int b = 0; b < kBlocks; ++b)
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          const int at = 4 * (piece(warp, b, t, h) ^ g);  // rows m0 + g and m0 + g + 8 share the key g
          float4 row_g = make_float4(0.f, 0.f, 0.f, 0.f), row_g8 = row_g;
          if (lower) row_g = *reinterpret_cast<const float4*>(buf + (m0 + g) * K + at);
          if (upper) row_g8 = *reinterpret_cast<const float4*>(buf + (m0 + g + 8) * K + at);
          uint32_t hi_g[2], lo_g[2], hi_g8[2], lo_g8[2];
          split4(row_g, hi_g, lo_g);
          split4(row_g8, hi_g8, lo_g8);
          const uint32_t a_hi[4] = {hi_g[0], hi_g8[0], hi_g[1], hi_g8[1]};
          const uint32_t a_lo[4] = {lo_g[0], lo_g8[0], lo_g[1], lo_g8[1]};
          const int s = b * kHalves + h;
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            mma_bf16_16816(acc[nt][0], a_lo, f.hi[nt][s][0], f.hi[nt][s][1]);
            mma_bf16_16816(acc[nt][1], a_hi, f.lo[nt][s][0], f.lo[nt][s][1]);
            mma_bf16_16816(acc[nt][2], a_hi, f.hi[nt][s][0], f.hi[nt][s][1]);
          }
        }
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        // The two small terms meet each other before the hi.hi sum.
        float sum[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[e] = (acc[nt][0][e] + acc[nt][1][e]) + acc[nt][2][e];
        const int m = nt * 8 + 2 * t;
        if (lower) *reinterpret_cast<float2*>(part + WindowPartials<kOut>::slot(rows, warp, m0 + g, m, key_g)) = make_float2(sum[0], sum[1]);
        if (upper)
          *reinterpret_cast<float2*>(part + WindowPartials<kOut>::slot(rows, warp, m0 + g + 8, m, key_g8)) = make_float2(sum[2], sum[3]);
      }
    }
  }
};

// The same products for a bf16 checkpoint: the chunk's rows are exact bf16 A operands of
// mma.sync m16n8k16 (16 rows, 16 k), and each window vector is split into two bf16 terms, hi =
// bf16(w) and lo = bf16(w - hi), whose sum is w to 2^-17 |w|; a product is A.hi + A.lo, two mma
// per 16 k. The interface (WindowPartials, BFrags, load_all_b, chunk) is WindowMma's.
//
// Which columns a lane reads: k-step s of warp w covers the 16 columns w K / 4 + 16 s ..; lane
// (g, t) supplies the fragment's k pairs {2t, 2t + 1} and {2t + 8, 2t + 9}, which are taken to be
// the 4 contiguous columns 4t .. 4t + 3 (one 8-byte load per row; A and B use the same order, and
// the mma sums its 16 k in any order). Rows g and g + 8 share the swizzle key g. The 4 rows of a
// half-warp phase read 2 pieces each, so rows 2q and 2q + 1 meet on one pair of bank groups (a
// 2-way conflict on these loads).
template <int K, int kOut>
struct WindowMmaBf16 : WindowPartials<kOut> {
  using WindowPartials<kOut>::kNTiles;
  using WindowPartials<kOut>::kOutPad;
  static constexpr int kWarpCols = K / kWarps;
  static constexpr int kSteps = kWarpCols / 16;
  static_assert(K == 64 || K == 128 || K == 256, "K must be 64, 128 or 256");
  static constexpr int kPieceElems = 8;  // bf16 elements per 16-byte piece

  struct BFrags {
    uint32_t hi[kNTiles][kSteps][2], lo[kNTiles][kSteps][2];
  };

  // This lane's B operand: output row m = 8 nt + g of the window (zeros past kOut), split.
  static __device__ __forceinline__ void load_all_b(const float* s_win, int warp, int lane, BFrags& f) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int m = nt * 8 + g;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        float4 w = make_float4(0.f, 0.f, 0.f, 0.f);
        if (m < kOut) w = *reinterpret_cast<const float4*>(s_win + m * K + warp * kWarpCols + 16 * s + 4 * t);
        const float v[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int r = 0; r < 2; ++r) split_bf16x2_packed(v[2 * r], v[2 * r + 1], f.hi[nt][s][r], f.lo[nt][s][r]);
      }
    }
  }

  // This warp's partial products of the chunk's `rows` rows (swizzled stage layout) into part
  // (WindowPartials::slot).
  static __device__ __forceinline__ void chunk(const __nv_bfloat16* buf, int rows, const BFrags& f, float* part) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int key_g = WindowPartials<kOut>::key(g), key_g8 = WindowPartials<kOut>::key(g + 8);
    for (int m0 = 0; m0 < rows; m0 += 16) {
      const bool lower = m0 + g < rows, upper = m0 + g + 8 < rows;  // this lane's two rows exist
      float acc_hi[kNTiles][4], acc_lo[kNTiles][4];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_hi[nt][e] = acc_lo[nt][e] = 0.f;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const int col = warp * kWarpCols + 16 * s + 4 * t;
        const int at = ((col / kPieceElems) ^ g) * kPieceElems + col % kPieceElems;  // key g (m0 % 16 == 0)
        uint2 row_g = make_uint2(0, 0), row_g8 = make_uint2(0, 0);  // rows m0 + g and m0 + g + 8
        if (lower) row_g = *reinterpret_cast<const uint2*>(buf + (m0 + g) * K + at);
        if (upper) row_g8 = *reinterpret_cast<const uint2*>(buf + (m0 + g + 8) * K + at);
        const uint32_t a[4] = {row_g.x, row_g8.x, row_g.y, row_g8.y};
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mma_bf16_16816(acc_lo[nt], a, f.lo[nt][s][0], f.lo[nt][s][1]);
          mma_bf16_16816(acc_hi[nt], a, f.hi[nt][s][0], f.hi[nt][s][1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const int m = nt * 8 + 2 * t;
        if (lower)
          *reinterpret_cast<float2*>(part + WindowPartials<kOut>::slot(rows, warp, m0 + g, m, key_g)) =
              make_float2(acc_lo[nt][0] + acc_hi[nt][0], acc_lo[nt][1] + acc_hi[nt][1]);
        if (upper)
          *reinterpret_cast<float2*>(part + WindowPartials<kOut>::slot(rows, warp, m0 + g + 8, m, key_g8)) =
              make_float2(acc_lo[nt][2] + acc_hi[nt][2], acc_lo[nt][3] + acc_hi[nt][3]);
      }
    }
  }
};

}  // namespace replayssm::gdn
