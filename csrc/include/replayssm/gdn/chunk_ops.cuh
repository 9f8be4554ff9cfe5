// The pieces the GDN row kernel (rows_kernel.cuh) and window kernel (spec_kernel.cuh) share: the
// element conversions, the state-row layout over lanes, the history decay weights and the
// in-shared-memory fold of the history into a checkpoint chunk. Both kernels replay the same ring
// against the same checkpoint stream, so a fix to one of these (a rounding choice, a bound) must
// land in both; one copy makes that automatic.
//
// The state-stream issue, the ring prefetch and the state-row stores stay in each kernel: as
// shared helpers they moved register counts or the FFMA/LDS mix of some row-kernel instance
// (checked with cuobjdump on sm_90a).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/cursor.h"
#include "replayssm/common/lane_sums.cuh"
#include "replayssm/common/mma_bf16.cuh"
#include "replayssm/gdn/params.h"

namespace replayssm::gdn {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// The state tile is streamed through shared memory with cp.async: kStages buffers of about
// kStageBytes, kStages - 1 of them in flight while the CTA works on one (and while the per-row
// vector work runs), so a CTA keeps ~24 KB of loads outstanding without holding them in registers.
constexpr int kStageBytes = 8192;
constexpr int kStages = 4;

// ---------------------------------------------------------------------------------------------
// Element conversions. torch builds with __CUDA_NO_{HALF,BFLOAT16}_CONVERSIONS__, so every
// conversion is an explicit intrinsic or bit operation.

template <typename T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr int kPerWord = 1;
  static __device__ __forceinline__ void unpack(uint32_t w, float* out) { out[0] = __uint_as_float(w); }
  static __device__ __forceinline__ uint32_t pack(const float* in) { return __float_as_uint(in[0]); }
  static __device__ __forceinline__ float to_f32(float x) { return x; }
  static __device__ __forceinline__ float from_f32(float x) { return x; }
};

template <>
struct Elem<__nv_bfloat16> {
  static constexpr int kPerWord = 2;
  // bf16 -> fp32 is exact: the bf16 bits are the high half of the fp32 bits.
  static __device__ __forceinline__ void unpack(uint32_t w, float* out) {
    out[0] = __uint_as_float(w << 16);
    out[1] = __uint_as_float(w & 0xffff0000u);
  }
  static __device__ __forceinline__ uint32_t pack(const float* in) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(in[0], in[1]);
    uint32_t w;
    memcpy(&w, &h, 4);
    return w;
  }
  static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_f32(float x) { return __float2bfloat16_rn(x); }
};

template <>
struct Elem<__half> {
  static constexpr int kPerWord = 2;
  static __device__ __forceinline__ void unpack(uint32_t w, float* out) {
    __half2 h;
    memcpy(&h, &w, 4);
    const float2 f = __half22float2(h);
    out[0] = f.x;
    out[1] = f.y;
  }
  static __device__ __forceinline__ uint32_t pack(const float* in) {
    const __half2 h = __floats2half2_rn(in[0], in[1]);
    uint32_t w;
    memcpy(&w, &h, 4);
    return w;
  }
  static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_f32(float x) { return __float2half_rn(x); }
};

// N consecutive elements (N * sizeof(T) a multiple of 8 bytes, address aligned to it) to fp32.
template <typename T, int N>
__device__ __forceinline__ void load_f32(const T* ptr, float* out) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes % 8 == 0, "vector loads are 8 or 16 bytes");
  constexpr int kPer = Elem<T>::kPerWord;
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      const uint4 w = reinterpret_cast<const uint4*>(ptr)[c];
      float* o = out + c * 4 * kPer;
      Elem<T>::unpack(w.x, o);
      Elem<T>::unpack(w.y, o + kPer);
      Elem<T>::unpack(w.z, o + 2 * kPer);
      Elem<T>::unpack(w.w, o + 3 * kPer);
    }
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(ptr);
    Elem<T>::unpack(w.x, out);
    Elem<T>::unpack(w.y, out + kPer);
  }
}

// load_f32 in two halves: N consecutive elements requested where written (load_words_here), then
// converted where first used, so that the request can go out before branches it does not depend on.
template <typename T, int N>
struct RawVec {
  static constexpr int kWords = N * static_cast<int>(sizeof(T)) / 4;
  uint32_t w[kWords];
  __device__ __forceinline__ void load_here(const T* ptr) { load_words_here<kWords>(ptr, w); }
  __device__ __forceinline__ void to_f32(float* out) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) Elem<T>::unpack(w[i], out + i * Elem<T>::kPerWord);
  }
};

// N fp32 values to N consecutive elements (round to nearest), same size rules as load_f32.
template <typename T, int N>
__device__ __forceinline__ void store_from_f32(T* ptr, const float* in) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes % 8 == 0, "vector stores are 8 or 16 bytes");
  constexpr int kPer = Elem<T>::kPerWord;
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      const float* i = in + c * 4 * kPer;
      reinterpret_cast<uint4*>(ptr)[c] = make_uint4(Elem<T>::pack(i), Elem<T>::pack(i + kPer),
                                                   Elem<T>::pack(i + 2 * kPer), Elem<T>::pack(i + 3 * kPer));
    }
  } else {
    reinterpret_cast<uint2*>(ptr)[0] = make_uint2(Elem<T>::pack(in), Elem<T>::pack(in + kPer));
  }
}

// One 16-byte store of the state stream. kStreaming: the .cs hint (evict first: every element is
// written once), which the fold's state write takes; the classic step stores plainly
// (RowsLauncher<Mode::kStateUpdate>).
template <bool kStreaming = true, typename T>
__device__ __forceinline__ void store_state16(T* ptr, const float* in) {
  constexpr int kPer = Elem<T>::kPerWord;
  const uint4 w = make_uint4(Elem<T>::pack(in), Elem<T>::pack(in + kPer), Elem<T>::pack(in + 2 * kPer),
                             Elem<T>::pack(in + 3 * kPer));
  if constexpr (kStreaming) {
    __stcs(reinterpret_cast<uint4*>(ptr), w);
  } else {
    *reinterpret_cast<uint4*>(ptr) = w;
  }
}

// Sum over the kLanes consecutive lanes that share a state row (all of them get the sum).
template <int kLanes>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int off = kLanes / 2; off >= 1; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

__host__ __device__ inline int round4(int x) { return (x + 3) & ~3; }

// Rows of S per pipeline stage (a power of two dividing tile_rows, as tile_rows is).
__host__ __device__ inline int stage_rows(int tile_rows, int K, int state_bytes) {
  const int r = kStageBytes / (K * state_bytes);
  return r < tile_rows ? r : tile_rows;
}

// ---------------------------------------------------------------------------------------------
// A state row of K elements is spread over kLanes = K/16 consecutive lanes, 16 elements each, read
// as 16-byte accesses: lane `sub` of the group holds, for access c, the columns starting here.
template <int K, typename ST>
struct RowLanes {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(ST));  // state elements per 16-byte access
  static constexpr int kLanes = K / 16;                           // lanes sharing one state row
  static constexpr int kElems = 16;                               // state elements per lane and row
  static constexpr int kChunks = kElems / kVec;                   // 16-byte accesses per lane and row
  static __device__ __forceinline__ int col(int c, int sub) { return kVec * (c * kLanes + sub); }
};

// The stage buffer of a CTA that folds on tensor cores is XOR-swizzled: 16-byte piece p of chunk
// row r sits at piece p ^ (r & 7) of that row. The mma accumulator order touches 8 rows at one
// column, and rows of 256 or 512 bytes would put all 8 in one bank group (8-way conflicts); the
// swizzle spreads them while every row keeps its 128-byte lines, which the state stream's 16-byte
// accesses need (padding the rows by 16 bytes instead cost the classic step 3.6 % and the
// non-flush step 6 %, measured). Other CTAs use key 0, the plain layout.
constexpr int kSwizzleRows = 8;

// This lane's 16 elements of a state row held in shared memory (a chunk buffer), as fp32; key:
// the row's swizzle key (kSwizzleRows), 0 in the plain layout.
template <int K, typename ST>
__device__ __forceinline__ void load_state_row(const ST* row, int sub, int key, float* s) {
  using L = RowLanes<K, ST>;
  // With kLanes >= kSwizzleRows the key only permutes the lanes of a row group: one XOR per row.
  const int sub_key = L::kLanes >= kSwizzleRows ? sub ^ key : sub;
#pragma unroll
  for (int c = 0; c < L::kChunks; ++c) {
    const int piece = L::kLanes >= kSwizzleRows ? c * L::kLanes + sub_key : (c * L::kLanes + sub) ^ key;
    const uint4 w = *reinterpret_cast<const uint4*>(row + piece * L::kVec);
    constexpr int kPer = Elem<ST>::kPerWord;
    Elem<ST>::unpack(w.x, &s[c * L::kVec]);
    Elem<ST>::unpack(w.y, &s[c * L::kVec + kPer]);
    Elem<ST>::unpack(w.z, &s[c * L::kVec + 2 * kPer]);
    Elem<ST>::unpack(w.w, &s[c * L::kVec + 3 * kPer]);
  }
}

// This lane's 16 elements of a state row back to global memory (the inverse of load_state_row).
template <int K, typename ST>
__device__ __forceinline__ void store_state_row(ST* row, int sub, const float* s) {
  using L = RowLanes<K, ST>;
#pragma unroll
  for (int c = 0; c < L::kChunks; ++c) store_state16(row + L::col(c, sub), &s[c * L::kVec]);
}

// This lane's 16 elements of a ring k_j (as stored, in shared memory) at the state columns; a dead
// row group (j past the history) gets zeros so its group sums stay harmless.
template <int K, typename ST, typename AT>
__device__ __forceinline__ void load_ring_k_cols(const AT* ring_k_row, bool live, int sub, float* kj) {
  using L = RowLanes<K, ST>;
#pragma unroll
  for (int c = 0; c < L::kChunks; ++c) {
    if (live) {
      load_f32<AT, L::kVec>(ring_k_row + L::col(c, sub), &kj[c * L::kVec]);
    } else {
#pragma unroll
      for (int e = 0; e < L::kVec; ++e) kj[c * L::kVec + e] = 0.f;
    }
  }
}

// What one token's gates at one v-head are made of: a and b as stored (converted where they are
// used: a conversion next to its load makes the warp wait there for the data), and the head's
// dt_bias (0 without one) and A_log. Requested together (load_gate_token and load_gate_head), ahead
// of the fp64 chain of token_log_decay: loaded inside it, A_log and dt_bias had put a memory
// latency in front of it.
template <typename AT>
struct GateInputs {
  AT a, b;
  float dt_bias, A_log;
};

template <typename AT>
__device__ __forceinline__ void load_gate_token(const GdnParams& p, int64_t tok, int hv, GateInputs<AT>& in) {
  in.a = static_cast<const AT*>(p.a)[tok * p.a_row_stride + hv];
  in.b = static_cast<const AT*>(p.b)[tok * p.b_row_stride + hv];
}

template <typename AT>
__device__ __forceinline__ void load_gate_head(const GdnParams& p, int hv, GateInputs<AT>& in) {
  in.dt_bias = p.dt_bias != nullptr ? p.dt_bias[hv] : 0.f;
  in.A_log = p.A_log[hv];
}

// The log decay g = -exp(A_log) softplus(a + dt_bias) of one token and v-head (softplus: the
// argument itself above 20), in fp64 and rounded once. g is what the ring keeps (ring_g) and what
// every decay weight is made of. In fp32 (expf within 2 ulp, then log1pf, then the product) its
// error reached 2.9x that of the same-precision PyTorch model, past the flash-attention rule's
// bound (test_spec_mma_fold_t2, K = 64: 1.19e-6 against 2 x 4.1e-7 + 2.4e-7, session 42). The
// fp64 chain is long (two exponentials and a log1p, ~0.3-0.45 us): the kernels run it in one
// thread per (token, v-head), on inputs requested before the ring's, so that it overlaps the
// ring's memory latency (in every thread, on inputs requested after the ring's, it cost 5-7 % at
// batch 1).
template <typename AT>
__device__ __forceinline__ float token_log_decay(const GateInputs<AT>& in) {
  const double dt = static_cast<double>(Elem<AT>::to_f32(in.a)) + static_cast<double>(in.dt_bias);
  const double softplus = dt > 20.0 ? dt : log1p(exp(dt));
  return static_cast<float>(-exp(static_cast<double>(in.A_log)) * softplus);
}

// The write strength beta = sigmoid(b).
template <typename AT>
__device__ __forceinline__ float token_beta(const GateInputs<AT>& in) {
  return 1.f / (1.f + expf(-Elem<AT>::to_f32(in.b)));
}

// ---------------------------------------------------------------------------------------------
// Warp 0 only: the history weights e^(G - G_j) = exp(sum_{i > j} g_i) as exclusive suffix sums,
// last chunk of 32 first, and e^G into *s_eG. Summing the suffix directly (not as G minus a
// prefix) keeps the recent entries' weights, the largest ones, accurate to their own magnitude
// rather than to that of G.
__device__ __forceinline__ void history_weights(int n, int lane, const float* s_ring_g, float* s_weight, float* s_eG) {
  float carry = 0.f;  // sum of g_i over the entries above this chunk
  for (int base = ((n - 1) / 32) * 32; base >= 0; base -= 32) {
    const int j = base + lane;
    float x = warp_suffix_sum(j + 1 < n ? s_ring_g[j + 1] : 0.f, lane);
    x += carry;
    if (j < n) s_weight[j] = expf(fminf(x, 0.f));
    carry = __shfl_sync(0xffffffffu, x, 0);
    if (lane == 0 && base == 0) *s_eG = expf(n > 0 ? x + s_ring_g[0] : 0.f);
  }
}

// The fold of the history into one chunk of `rows` state rows held in shared memory (flush rows):
// S = decay * S0 + sum_{j < n} (w_j u_j) k_j^T, with w_j = s_weight[j], u_j the chunk's rows of ring
// entry j (s_ring_u_raw, [n][tile rows] as stored, first row chunk_row0) and k_j (s_ring_k_raw,
// [n][K] as stored). The caller's barrier must follow before other threads read the chunk.
//
// CUDA cores (fp16 / fp32 activations): column by column, a thread owns fixed columns, so
// w_j k_j[col] is one load and one multiply per entry, reused over 8 consecutive rows whose u_j
// come in one 16-byte load. (An fp32 copy of the weighted u in shared memory cost 8.7 KB per CTA
// and held the row kernel to 3 CTAs per SM.)
template <int K, typename ST, typename AT>
__device__ __forceinline__ void fold_chunk_fma(ST* buf, int chunk_row0, int rows, float decay, int n,
                                               const float* s_weight, const AT* s_ring_k_raw, const AT* s_ring_u_raw,
                                               int tile_rows) {
  constexpr int kColsPerThread = K > kThreads ? K / kThreads : 1;
  constexpr int kRowSplit = K < kThreads ? kThreads / K : 1;  // threads sharing a column
  const int rows_per_thread = rows / kRowSplit;               // a multiple of 8
  const int col0 = K < kThreads ? threadIdx.x % K : threadIdx.x;
  const int row0 = K < kThreads ? (threadIdx.x / K) * rows_per_thread : 0;
#pragma unroll
  for (int cc = 0; cc < kColsPerThread; ++cc) {
    const int cidx = col0 + cc * kThreads;
    for (int rb = row0; rb < row0 + rows_per_thread; rb += 8) {
      float x[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) x[r] = decay * Elem<ST>::to_f32(buf[(rb + r) * K + cidx]);
      const AT* ubase = s_ring_u_raw + chunk_row0 + rb;
#pragma unroll 2
      for (int j = 0; j < n; ++j) {
        const float wk = s_weight[j] * Elem<AT>::to_f32(s_ring_k_raw[j * K + cidx]);
        float u[8];
        load_f32<AT, 8>(ubase + j * tile_rows, u);
#pragma unroll
        for (int r = 0; r < 8; ++r) x[r] = fmaf(u[r], wk, x[r]);
      }
#pragma unroll
      for (int r = 0; r < 8; ++r) buf[(rb + r) * K + cidx] = Elem<ST>::from_f32(x[r]);
    }
  }
}

// Two consecutive state elements of a stage buffer as fp32, and back (round to nearest).
template <typename ST>
__device__ __forceinline__ void load_pair(const ST* ptr, float decay, float* out) {
  if constexpr (sizeof(ST) == 4) {
    const float2 v = *reinterpret_cast<const float2*>(ptr);
    out[0] = decay * v.x, out[1] = decay * v.y;
  } else {
    Elem<ST>::unpack(*reinterpret_cast<const uint32_t*>(ptr), out);
    out[0] *= decay, out[1] *= decay;
  }
}
template <typename ST>
__device__ __forceinline__ void store_pair(ST* ptr, const float* in) {
  if constexpr (sizeof(ST) == 4) {
    *reinterpret_cast<float2*>(ptr) = make_float2(in[0], in[1]);
  } else {
    *reinterpret_cast<uint32_t*>(ptr) = Elem<ST>::pack(in);
  }
}

// Tensor cores (bf16 activations): the chunk is the accumulator of a (rows x n) . (n x K) product,
// 16 rows by 8 columns per mma.sync m16n8k16, 16 entries per k-step; warp w owns columns
// [w K / 4, (w + 1) K / 4). B is k_j as stored (bf16, exact). A = w_j u_j[v] is formed in fp32 and
// split into three bf16 terms whose sum is exact (split_bf16x3), so the products lose nothing and
// only the fp32 accumulation rounds, as in the CUDA-core fold. Entries past n and rows past the
// chunk read a 16-byte zero block (s_zeros) instead of the ring, whose unused rows hold whatever
// an earlier CTA left there. The chunk is in the swizzled layout (kSwizzleRows). Measured on the
// decode flush step at batch 256, B = 16 (the row kernel): Qwen3.5-4B 394 -> 327 µs (the step
// with no fold at all took 303), Qwen3.5-122B 776 -> 637 µs. The window kernel folds this way
// where kWindowTensorCores or kWindowMmaFoldOnly (spec_kernel.cuh says where and why).
template <int K, typename ST>
__device__ __forceinline__ void fold_chunk_mma(ST* buf, int chunk_row0, int rows, float decay, int n,
                                               const float* s_weight, const __nv_bfloat16* s_ring_k,
                                               const __nv_bfloat16* s_ring_u, int tile_rows,
                                               const __nv_bfloat16* s_zeros) {
  constexpr int kCols = K / kWarps;  // this warp's columns
  constexpr int kNTiles = kCols / 8;
  constexpr int kVec = RowLanes<K, ST>::kVec;  // state elements per 16-byte piece
  static_assert(kNTiles % 2 == 0, "ldmatrix x4 loads B for two n-tiles");
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;          // accumulator / A / B fragment coordinates
  const int mat = lane >> 3, mat_row = lane & 7;  // the ldmatrix row this lane addresses
  const int c0 = (threadIdx.x >> 5) * kCols;
  // This lane's accumulator pair of n-tile nt in row r (r & 7 == g: the swizzle key).
  auto pair_at = [&](int r, int nt) {
    const int c = c0 + nt * 8 + 2 * t;
    return buf + r * K + ((c / kVec) ^ g) * kVec + c % kVec;
  };
  for (int m0 = 0; m0 < rows; m0 += 16) {
    const bool upper = m0 + 8 < rows;  // rows m0 + 8 .. m0 + 15 exist (rows is a multiple of 8)
    float acc[kNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      load_pair<ST>(pair_at(m0 + g, nt), decay, &acc[nt][0]);
      if (upper) {
        load_pair<ST>(pair_at(m0 + g + 8, nt), decay, &acc[nt][2]);
      } else {
        acc[nt][2] = acc[nt][3] = 0.f;
      }
    }
    for (int jb = 0; jb < n; jb += 16) {
      // A: matrix m of the ldmatrix holds rows (m & 1) * 8 .. and entries (m >> 1) * 8 .. of the
      // [j][v] ring tile, transposed into the row-major A fragment.
      const int ja = jb + (mat >> 1) * 8 + mat_row;
      const int va = m0 + (mat & 1) * 8;
      uint32_t araw[4];
      ldmatrix_x4_trans(araw, ja < n && va < rows ? s_ring_u + ja * tile_rows + chunk_row0 + va : s_zeros);
      // Fragment register m holds entries jb + 2t, +1 (m < 2) or jb + 8 + 2t, +1 (m >= 2).
      float w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = jb + (e >> 1) * 8 + 2 * t + (e & 1);
        w[e] = j < n ? s_weight[j] : 0.f;
      }
      uint32_t a_hi[4], a_mid[4], a_lo[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        float u[2];
        Elem<__nv_bfloat16>::unpack(araw[m], u);
        split_bf16x3_packed(u[0] * w[(m >> 1) * 2], u[1] * w[(m >> 1) * 2 + 1], a_hi[m], a_mid[m], a_lo[m]);
      }
#pragma unroll
      for (int nt = 0; nt < kNTiles; nt += 2) {
        // B: matrix m holds entries (m & 1) * 8 .. and columns (m >> 1) * 8 .. of the [j][K] tile:
        // registers 0, 1 are n-tile nt's fragment, 2, 3 n-tile nt + 1's.
        const int jk = jb + (mat & 1) * 8 + mat_row;
        uint32_t b[4];
        ldmatrix_x4_trans(b, jk < n ? s_ring_k + jk * K + c0 + nt * 8 + (mat >> 1) * 8 : s_zeros);
        // Smallest terms first: the accumulator then meets them before it grows.
        mma_bf16_16816(acc[nt], a_lo, b[0], b[1]);
        mma_bf16_16816(acc[nt], a_mid, b[0], b[1]);
        mma_bf16_16816(acc[nt], a_hi, b[0], b[1]);
        mma_bf16_16816(acc[nt + 1], a_lo, b[2], b[3]);
        mma_bf16_16816(acc[nt + 1], a_mid, b[2], b[3]);
        mma_bf16_16816(acc[nt + 1], a_hi, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      store_pair<ST>(pair_at(m0 + g, nt), &acc[nt][0]);
      if (upper) store_pair<ST>(pair_at(m0 + g + 8, nt), &acc[nt][2]);
    }
  }
}

// Whether a CTA of this activation type folds on tensor cores (bf16 ring entries are exact mma
// operands), and so streams its flush rows through the swizzled layout.
template <typename AT>
constexpr bool kMmaFold = std::is_same_v<AT, __nv_bfloat16>;

// The fold of one chunk (see fold_chunk_fma and fold_chunk_mma); the chunk is swizzled exactly
// when kMmaFold<AT>.
template <int K, typename ST, typename AT>
__device__ __forceinline__ void fold_chunk(ST* buf, int chunk_row0, int rows, int tile_rows, float decay, int n,
                                           const float* s_weight, const AT* s_ring_k_raw, const AT* s_ring_u_raw,
                                           const float* s_zeros) {
  if constexpr (kMmaFold<AT>) {
    fold_chunk_mma<K, ST>(buf, chunk_row0, rows, decay, n, s_weight, s_ring_k_raw, s_ring_u_raw, tile_rows,
                          reinterpret_cast<const __nv_bfloat16*>(s_zeros));
  } else {
    fold_chunk_fma<K, ST, AT>(buf, chunk_row0, rows, decay, n, s_weight, s_ring_k_raw, s_ring_u_raw, tile_rows);
  }
}

}  // namespace replayssm::gdn
