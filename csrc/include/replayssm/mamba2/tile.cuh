// How a CTA streams one head's (P x N) state: the lane layout of 16-byte vectors along N, the
// conversions between storage dtypes and fp32, and the small math helpers shared by the Mamba-2
// kernels. Device code only, no torch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/lane_sums.cuh"

namespace replayssm::mamba2 {

// ---------------------------------------------------------------------------------------------
// Scalar conversions (explicit intrinsics: torch's build defines __CUDA_NO_*_CONVERSIONS__).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// ---------------------------------------------------------------------------------------------
// 16-byte state vectors: VE elements of the state dtype, unpacked to / packed from fp32.
// ---------------------------------------------------------------------------------------------
template <typename St>
struct StateVec;

template <>
struct StateVec<float> {
  static constexpr int kElems = 4;
  __device__ __forceinline__ static void unpack(const uint4& v, float* f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ __forceinline__ static uint4 pack(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
};

template <typename Half2, typename Half>
struct PairCvt;

template <>
struct PairCvt<__nv_bfloat162, __nv_bfloat16> {
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    __nv_bfloat162 h;
    __builtin_memcpy(&h, &w, 4);
    return __bfloat1622float2(h);
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // a in the low half: element order kept
    uint32_t w;
    __builtin_memcpy(&w, &h, 4);
    return w;
  }
};

template <>
struct PairCvt<__half2, __half> {
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    __half2 h;
    __builtin_memcpy(&h, &w, 4);
    return __half22float2(h);
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    uint32_t w;
    __builtin_memcpy(&w, &h, 4);
    return w;
  }
};

template <typename Half2, typename Half>
struct StateVec16 {
  static constexpr int kElems = 8;
  using Cvt = PairCvt<Half2, Half>;
  __device__ __forceinline__ static void unpack(const uint4& v, float* f) {
    float2 t;
    t = Cvt::unpack(v.x), f[0] = t.x, f[1] = t.y;
    t = Cvt::unpack(v.y), f[2] = t.x, f[3] = t.y;
    t = Cvt::unpack(v.z), f[4] = t.x, f[5] = t.y;
    t = Cvt::unpack(v.w), f[6] = t.x, f[7] = t.y;
  }
  __device__ __forceinline__ static uint4 pack(const float* f) {
    return make_uint4(Cvt::pack(f[0], f[1]), Cvt::pack(f[2], f[3]), Cvt::pack(f[4], f[5]), Cvt::pack(f[6], f[7]));
  }
};

template <>
struct StateVec<__nv_bfloat16> : StateVec16<__nv_bfloat162, __nv_bfloat16> {};
template <>
struct StateVec<__half> : StateVec16<__half2, __half> {};

// Four consecutive values of T as stored (one 8- or 16-byte vector: what a cp.async of them
// copies, and what a copy into the ring stores unchanged), and their fp32 values.
template <typename T>
using Raw4 = std::conditional_t<std::is_same_v<T, float>, float4, uint2>;

template <typename T>
__device__ __forceinline__ void unpack4(const Raw4<T>& w, float (&out)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    out[0] = w.x, out[1] = w.y, out[2] = w.z, out[3] = w.w;
  } else {
    using Cvt = typename StateVec<T>::Cvt;
    const float2 a = Cvt::unpack(w.x), b = Cvt::unpack(w.y);
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  }
}

// VE consecutive values of T in shared memory (aligned to VE * sizeof(T), up to 16 bytes) as fp32.
template <typename T, int VE>
__device__ __forceinline__ void load_f32(const T* src, float (&out)[VE]) {
  static_assert(VE % 4 == 0, "VE: whole 16-byte state vectors of fp32 (4) or 16-bit (8) elements");
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int q = 0; q < VE / 4; ++q) {
      const float4 v = reinterpret_cast<const float4*>(src)[q];
      out[4 * q + 0] = v.x, out[4 * q + 1] = v.y, out[4 * q + 2] = v.z, out[4 * q + 3] = v.w;
    }
  } else if constexpr (VE == 4) {
    unpack4<T>(*reinterpret_cast<const Raw4<T>*>(src), out);
  } else {
#pragma unroll
    for (int q = 0; q < VE / 8; ++q) StateVec<T>::unpack(reinterpret_cast<const uint4*>(src)[q], out + 8 * q);
  }
}

// ---------------------------------------------------------------------------------------------
// Lane layout of one state row (N elements, N contiguous) over a warp.
//
// A row is N / kVecElems 16-byte vectors. kLanesPerRow lanes share a row (all 32 when the row has
// at least 32 vectors), so one warp-wide load covers kRowsPerWarp whole, adjacent rows: 512
// contiguous bytes, fully coalesced. Lane `lr` of a row holds the vectors k * kLanesPerRow + lr
// (k < kVecsPerLane), i.e. kPerLane = kVecsPerLane * kVecElems state elements whose n indices
// are n_of(lr, k, e). The C / B values a lane needs are those same n indices, so they live in
// registers (C) or are read as 16-byte shared-memory vectors (B) without bank conflicts.
// ---------------------------------------------------------------------------------------------
template <typename St, int N>
struct RowLayout {
  static constexpr int kVecElems = StateVec<St>::kElems;
  static constexpr int kVecsPerRow = N / kVecElems;
  static constexpr int kLanesPerRow = kVecsPerRow < 32 ? kVecsPerRow : 32;
  static constexpr int kVecsPerLane = kVecsPerRow / kLanesPerRow;
  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  static constexpr int kPerLane = kVecsPerLane * kVecElems;
  // Rows each thread streams per iteration: 16 state values, which the kernels hold unpacked to
  // fp32 next to their C or B vectors (four 16-byte loads of an fp32 state, two of a 2-byte
  // state). Four loads of a 2-byte state (32 values) spilled in every bf16 / fp16 checkpoint
  // instance of the replay kernel (64 registers: 64-72 bytes of stack) and the spec kernel
  // (80 registers at T = 4: 110-160 bytes).
  static constexpr int kRowsPerThread = kPerLane >= 16 ? 1 : 16 / kPerLane;
  static_assert(N % kVecElems == 0 && kVecsPerRow % kLanesPerRow == 0, "N must be a multiple of 32 * vector");
  static_assert(32 % kLanesPerRow == 0, "lanes per row must divide the warp");
  using Sums = LaneSums<kLanesPerRow>;

  __device__ __forceinline__ static int n_of(int lr, int k, int e) { return (k * kLanesPerRow + lr) * kVecElems + e; }

  // Sum over the kLanesPerRow lanes of one row (they are adjacent lanes: xor offsets stay inside).
  __device__ __forceinline__ static float row_sum(float v) {
#pragma unroll
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
  }

  // Row sums of M values at once (common/lane_sums.cuh), e.g. one state row's dot products with
  // the M C vectors of a spec window.
  template <int M>
  __host__ __device__ static constexpr int kept_sums() { return Sums::template kept_sums<M>(); }
  template <int M>
  __device__ __forceinline__ static int first_sum(int lr) { return Sums::template first_sum<M>(lr); }
  template <int M>
  __device__ __forceinline__ static bool sum_holder(int lr) { return Sums::template sum_holder<M>(lr); }
  template <int M, int kPresorted = 0>
  __device__ __forceinline__ static void row_sums(float (&v)[M], int lr) {
    Sums::template row_sums<M, kPresorted>(v, lr);
  }
  template <int M, int kLevels>
  __device__ __forceinline__ static int presorted_mask(int lr) { return Sums::template presorted_mask<M, kLevels>(lr); }
  template <int M>
  __host__ __device__ static constexpr int halvings() { return Sums::template halvings<M>(); }
};

// Rows of one head handled per CTA iteration, for the host-side choice of the P chunk.
template <typename St, int N, int kWarps, int kRowsPerThread = RowLayout<St, N>::kRowsPerThread>
constexpr int rows_per_iteration() {
  return kWarps * RowLayout<St, N>::kRowsPerWarp * kRowsPerThread;
}

// Row stride of a grouped left-factor table (TileStream::grouped_row) for `rows` tile rows: whole
// stream iterations, since the last iteration's rows past `rows` are read with the others.
__host__ __device__ constexpr int grouped_table_rows(int rows, int rows_per_iter) {
  return (rows + rows_per_iter - 1) / rows_per_iter * rows_per_iter;
}

// One 16-byte state vector, streamed (evict-first: the state is touched once per step). A state
// tensor whose base or slot stride is not 16-byte aligned (a paged view may start anywhere) takes
// the element-wise path; `aligned` is uniform over a launch, so the branch costs nothing.
template <typename St>
__device__ __forceinline__ uint4 load_state_vec(const St* p, bool aligned) {
  if (aligned) return __ldcs(reinterpret_cast<const uint4*>(p));
  uint32_t w[4];
  if constexpr (sizeof(St) == 4) {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __ldcs(q + i);
  } else {
    const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<uint32_t>(__ldcs(q + 2 * i)) | (static_cast<uint32_t>(__ldcs(q + 2 * i + 1)) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <typename St>
__device__ __forceinline__ void store_state_vec(St* p, const uint4& v, bool aligned) {
  if (aligned) {
    __stcs(reinterpret_cast<uint4*>(p), v);
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(St) == 4) {
    uint32_t* q = reinterpret_cast<uint32_t*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) __stcs(q + i, w[i]);
  } else {
    unsigned short* q = reinterpret_cast<unsigned short*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __stcs(q + 2 * i, static_cast<unsigned short>(w[i] & 0xffffu));
      __stcs(q + 2 * i + 1, static_cast<unsigned short>(w[i] >> 16));
    }
  }
}

// A state view's 16-byte alignment for TileStream::load / store: std::true_type in a kernel instance
// that is launched on aligned views only (the launcher checks), else the run-time flag.
template <bool kKnownAligned>
__device__ __forceinline__ auto stream_alignment(bool aligned) {
  if constexpr (kKnownAligned)
    return std::true_type{};
  else
    return aligned;
}

// One thread's share of the stream of a (head, P chunk) state tile, shared by the replay and spec
// kernels: per iteration U rows of KV 16-byte vectors (RowLayout), row pl of the chunk at
// S + pl * N; rows at or past plen load as zeros and are never stored. U defaults to RowLayout's
// rows per thread (about four 16-byte loads); a kernel that keeps more per lane lowers it.
template <typename St, int N, int kWarps, int kRowsPerThread = RowLayout<St, N>::kRowsPerThread>
struct TileStream {
  using L = RowLayout<St, N>;
  using V = StateVec<St>;
  static constexpr int U = kRowsPerThread;
  static_assert(U >= 1, "at least one row per thread");
  static constexpr int KV = L::kVecsPerLane;
  static constexpr int VE = L::kVecElems;
  static constexpr int kRowsPerIter = kWarps * L::kRowsPerWarp * U;

  St* S;
  int plen;
  int warp;
  int rw;  // row within the warp's load
  int lr;  // lane within its row
  bool aligned;

  // Chunk row of this thread's u-th row in iteration it.
  __device__ __forceinline__ int row_of(int it, int u) const {
    return it * kRowsPerIter + (u * kWarps + warp) * L::kRowsPerWarp + rw;
  }

  __device__ __forceinline__ void load(int it, uint4 (&raw)[U][KV]) const { load(it, raw, aligned); }
  // vec_aligned: the view's 16-byte alignment as a bool, or std::true_type where the launch
  // guarantees it (stream_alignment); then each row is one predicated 16-byte load, where the
  // run-time flag puts a branch around both load forms in every row.
  template <typename Aligned>
  __device__ __forceinline__ void load(int it, uint4 (&raw)[U][KV], Aligned vec_aligned) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pl = row_of(it, u);
#pragma unroll
      for (int k = 0; k < KV; ++k)
        raw[u][k] = pl < plen ? load_state_vec(S + static_cast<int64_t>(pl) * N + L::n_of(lr, k, 0), static_cast<bool>(vec_aligned))
                              : make_uint4(0, 0, 0, 0);
    }
  }

  // load() for a view known to be 16-byte aligned, without a branch per row: a row at or past
  // plen loads row plen - 1 instead of zeros, so the caller must not use those rows' values.
  __device__ __forceinline__ void load_clamped(int it, uint4 (&raw)[U][KV]) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pl = min(row_of(it, u), plen - 1);
#pragma unroll
      for (int k = 0; k < KV; ++k) raw[u][k] = load_state_vec(S + static_cast<int64_t>(pl) * N + L::n_of(lr, k, 0), true);
    }
  }

  // This thread's first state element of iteration 0 (row row_of(0, 0), its lane's first vector):
  // every other load of the tile is at a constant offset from it plus it * kRowsPerIter rows.
  __device__ __forceinline__ const St* lane_origin() const { return S + static_cast<int64_t>(row_of(0, 0)) * N + L::n_of(lr, 0, 0); }
  // load(it, raw, vec_aligned) addressed from lane_origin(), kept by the caller.
  template <typename Aligned>
  __device__ __forceinline__ void load_from(const St* origin, int it, uint4 (&raw)[U][KV], Aligned vec_aligned) const {
    const St* const base = origin + static_cast<int64_t>(it) * kRowsPerIter * N;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pl = row_of(it, u);
#pragma unroll
      for (int k = 0; k < KV; ++k)
        raw[u][k] = pl < plen ? load_state_vec(base + (u * kWarps * L::kRowsPerWarp * N + k * L::kLanesPerRow * VE),
                                               static_cast<bool>(vec_aligned))
                              : make_uint4(0, 0, 0, 0);
    }
  }

  // Iterations [it0, it0 + count) of the tile asked of L2 by one bulk prefetch from thread 0 (their
  // rows are contiguous in the state; clipped to the tile). Only 16-byte aligned views take it.
  __device__ __forceinline__ void prefetch_iters_l2(int it0, int count) const {
    const int r0 = it0 * kRowsPerIter, r1 = min(plen, (it0 + count) * kRowsPerIter);
    if (threadIdx.x == 0 && aligned && r0 < r1)
      prefetch_l2_bulk(S + static_cast<int64_t>(r0) * N, static_cast<uint32_t>((r1 - r0) * N * sizeof(St)));
  }

  // The tile read for its dot products alone (no scale, update or store) on a view known to be
  // 16-byte aligned: two iterations' loads in flight per warp, even iterations through raw (which
  // holds iteration 0's loads on entry) and odd ones through a second buffer, each refilled right
  // after its own dot products. With one buffer and a next copy, ptxas placed the next loads after
  // the current dot products at the register bound whatever the source order: one iteration in
  // flight. Rows past plen hold row plen - 1 (load_clamped): dots must not keep their sums.
  // before(it) runs at the start of iteration it, dots(it, acc) takes its values. ~68 instructions
  // per iteration against ~180 in the decode's general loop (nano SASS).
  template <typename Before, typename Dots>
  __device__ __forceinline__ void dots_two_buffers(int iters, uint4 (&raw)[U][KV], Before before, Dots dots) const {
    uint4 odd[U][KV];
    if (1 < iters) load_clamped(1, odd);
    for (int it = 0; it < iters; it += 2) {
      before(it);
      float acc[U][KV][VE];
      unpack(raw, acc);
      dots(it, acc);
      if (it + 2 < iters) load_clamped(it + 2, raw);
      if (it + 1 >= iters) break;
      before(it + 1);
      unpack(odd, acc);
      dots(it + 1, acc);
      if (it + 3 < iters) load_clamped(it + 3, odd);
    }
  }

  // acc = raw, in fp32.
  __device__ __forceinline__ static void unpack(const uint4 (&raw)[U][KV], float (&acc)[U][KV][VE]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k) V::unpack(raw[u][k], acc[u][k]);
  }

  // Where chunk row pl's left factors sit in a grouped table (add_rank_update_grouped): inside each
  // iteration's kRowsPerIter rows, the U rows that one thread updates are adjacent.
  __host__ __device__ static int grouped_row(int pl) {
    constexpr int kGroups = kWarps * L::kRowsPerWarp;  // threads with distinct rows per iteration
    const int q = pl % kRowsPerIter;
    return pl - q + (q % kGroups) * U + q / kGroups;
  }

  // acc[p][n] += sum_{j < n_upd} sx[p][j] B_j[n]: the rank-n_upd update, with B_j (BT: fp32 or the
  // activation dtype) at b_s + j * N and the left factors in a grouped table: row pl's factor of
  // entry j at xg_s[j * ldg + grouped_row(pl)], ldg a multiple of kRowsPerIter, so the U factors a
  // thread needs per entry are one U-float shared load (one broadcast wavefront per warp) instead of
  // U, with no more live registers (four factors of one row per 16-byte load, from a [row][j] table,
  // needed 4 U more and spilled at the replay kernel's 64-register bound). The table holds every row
  // of the iteration: rows past plen are the caller's zeros, never stored. The replay kernel's
  // update is issue-bound (session 24's ncu): nano / super SASS, 98 -> 82 instructions per four
  // entries; H200, B = 16, batch 256, in one run: output-only flush step nano 600.8 -> 588.0 us
  // (1.12 -> 1.10x the classic step), super 641.3 -> 618.8; state-and-output cycle nano 380.8 ->
  // 369.2, super 435.6 -> 418.7; the output-only non-flush step at batch 1 / 8 1-2 % slower (5.93 ->
  // 6.02 us nano batch 1), in two runs (bench/results/h200-2026-12-01-s25-aligned-grouped).
  template <typename BT>
  __device__ __forceinline__ void add_rank_update_grouped(int it, int n_upd, const BT* b_s, const float* xg_s, int ldg,
                                                          float (&acc)[U][KV][VE]) const {
    const float* xg = xg_s + it * kRowsPerIter + (warp * L::kRowsPerWarp + rw) * U;
    for (int j = 0; j < n_upd; ++j, xg += ldg) add_rank_one(b_s + j * N, xg, acc);
  }

  // acc[p][n] += sx[p] b[n] for this thread's U rows: one entry of the rank updates above, its U
  // factors one shared load at xg.
  template <typename BT>
  __device__ __forceinline__ void add_rank_one(const BT* b, const float* xg, float (&acc)[U][KV][VE]) const {
    static_assert(U == 1 || U == 2 || U == 4, "one shared load of U floats");
    float bj[KV][VE];
#pragma unroll
    for (int k = 0; k < KV; ++k) load_f32<BT, VE>(b + L::n_of(lr, k, 0), bj[k]);
    float sx[U];
    if constexpr (U == 4) {
      const float4 v = *reinterpret_cast<const float4*>(xg);
      sx[0] = v.x, sx[1] = v.y, sx[2] = v.z, sx[3] = v.w;
    } else if constexpr (U == 2) {
      const float2 v = *reinterpret_cast<const float2*>(xg);
      sx[0] = v.x, sx[1] = v.y;
    } else {
      sx[0] = *xg;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k)
#pragma unroll
        for (int e = 0; e < VE; ++e) acc[u][k][e] = fmaf(sx[u], bj[k][e], acc[u][k][e]);
  }

  // add_rank_update_grouped with the entries in whole groups of four (n_padded a multiple of 4,
  // the factors of the padding entries zero and their B rows finite): one loop without a tail, so
  // the accumulators stay in the loop's registers (kSpecFoldPadded in spec_kernel.cuh).
  template <typename BT>
  __device__ __forceinline__ void add_rank_update_padded(int it, int n_padded, const BT* b_s, const float* xg_s, int ldg,
                                                         float (&acc)[U][KV][VE]) const {
    const float* xg = xg_s + it * kRowsPerIter + (warp * L::kRowsPerWarp + rw) * U;
#pragma unroll 1
    for (int j0 = 0; j0 < n_padded; j0 += 4)
#pragma unroll
      for (int j = j0; j < j0 + 4; ++j) add_rank_one(b_s + j * N, xg + j * ldg, acc);
  }

  // acc = c0 * raw, in fp32.
  __device__ __forceinline__ static void unpack_scaled(const uint4 (&raw)[U][KV], float c0, float (&acc)[U][KV][VE]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k) {
        V::unpack(raw[u][k], acc[u][k]);
#pragma unroll
        for (int e = 0; e < VE; ++e) acc[u][k][e] *= c0;
      }
  }

  // acc = c0[u] * raw, a scale per row.
  __device__ __forceinline__ static void unpack_scaled(const uint4 (&raw)[U][KV], const float (&c0)[U],
                                                       float (&acc)[U][KV][VE]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k) {
        V::unpack(raw[u][k], acc[u][k]);
#pragma unroll
        for (int e = 0; e < VE; ++e) acc[u][k][e] *= c0[u];
      }
  }

  // The rows of iteration it back to the state, in its dtype.
  __device__ __forceinline__ void store(int it, const float (&acc)[U][KV][VE]) const { store(it, acc, aligned); }
  template <typename Aligned>
  __device__ __forceinline__ void store(int it, const float (&acc)[U][KV][VE], Aligned vec_aligned) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pl = row_of(it, u);
      if (pl < plen) {
#pragma unroll
        for (int k = 0; k < KV; ++k)
          store_state_vec(S + static_cast<int64_t>(pl) * N + L::n_of(lr, k, 0), V::pack(acc[u][k]),
                          static_cast<bool>(vec_aligned));
      }
    }
  }
};

// dt + bias -> delta: softplus20 (log1p(exp(v)), or v itself above 20) when asked.
__device__ __forceinline__ float biased_dt_to_delta(float v, bool softplus) {
  return softplus ? (v > 20.f ? v : log1pf(expf(v))) : v;
}

// dt -> delta: bias, then softplus20 when asked.
__device__ __forceinline__ float make_delta(float dt, const float* dt_bias, int h, bool softplus) {
  return biased_dt_to_delta(dt + (dt_bias != nullptr ? dt_bias[h] : 0.f), softplus);
}

// y * silu(z) = y * z * sigmoid(z).
__device__ __forceinline__ float gate(float y, float z) { return y * (z / (1.f + expf(-z))); }

// A row stride for [p][j] tiles in shared memory that is odd, so consecutive p land in different
// banks.
__host__ __device__ __forceinline__ int odd_stride(int n) { return (n % 2 == 0) ? n + 1 : n; }


}  // namespace replayssm::mamba2
