// The Mamba-2 speculative-verify kernel (mamba2_spec_verify): n <= T window tokens per row, the
// checkpoint streamed once for all n outputs.
//
// One CTA = one (row, head, chunk of P), as in the replay kernel (replay_kernel.cuh), whose state
// stream (TileStream of tile.cuh: 16-byte vectors, one iteration's loads in flight, the fold's
// rank update, the state write) this kernel shares. With the row's entries numbered 0 .. hist+n-1
// (the hist ring entries in logical order, then the n window tokens; window token i is entry
// hist+i) and e0 = hist on flush rows, 0 otherwise (entries below e0 are folded into the state
// tile, the rest are replayed per output):
//   acc      = c0 * S0 + sum_{j < e0} s_j x_j[p] B_j[n]          (flush rows: the fold; else acc = S0)
//   state    = acc                                              (flush rows only, the only state write)
//   y_i[p]   = c1_i * (acc . C_i) + sum_{e0 <= k <= hist+i} w_ik (B_k . C_i) x_k[p] + D x_i[p]
// with, for the decay exponents, sums over consecutive entries only (never total - prefix):
//   c0 = exp(A sum_{m < hist} d_m),  s_j = d_j exp(A sum_{j < m < hist} d_m),
//   c1_i = exp(A sum_{e0 <= m <= hist+i} d_m),  w_ik = d_k exp(A sum_{k < m <= hist+i} d_m).
// This is replayssm_ext/reference.py::mamba2_spec_verify (which steps a formed state through the
// window) in closed form: equal up to rounding, and no state is formed on non-flush rows.
//
// Each state row meets all kT C vectors while it is in registers: kT dot products per row, reduced
// across the row's lanes with RowLayout::row_sums (about kT + log2(lanes) shuffles, not kT log2).
//
// Tensor cores: the small products of this kernel -- B_k . C_i (entries x window, <= (B+T) x T per
// group), the per-p replay sum sum_k (w_ik B_k.C_i) x_k[p] ((P x (B+T)) . ((B+T) x T) per head), the
// fold's X^T (s B) (rank-hist update of a P x N tile) and the kT dot products per state row
// (the (P x N) . (N x T) product against the streamed state) -- are all small GEMMs that would go
// to mma.sync (tf32 / bf16 with an fp32 accumulator) in a later version; this first version keeps
// them on the CUDA cores.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/cursor.h"
#include "replayssm/common/smem_rows.cuh"
#include "replayssm/mamba2/entries.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Shared memory of one spec CTA, in floats: the replay weights w_ik, then w_ik (B_k . C_i),
// [R][kT] (kT contiguous, read as 16-byte vectors); B_k . C_i [R][kT]; the fold's left factors
// s_k x_k [p_chunk][odd(R)]; delta_k and the fold weights s_k [R] each; c1_i [kT]; the state dot
// products [kT][p_chunk]; the fold's B_k in fp32 [R][N] when b_copy (spec_b_copy); then the staged
// entries in the activation dtype, B_k [R][N] and x_k [R][p_chunk].
struct SpecSmem {
  int wbc, bc, x, ldx, delta, fold_w, c1, dot, b_f32, b_raw, x_raw, total;
  __host__ __device__ SpecSmem(int R, int p_chunk, int N, int kT, int act_bytes, bool b_copy) {
    ldx = odd_stride(R);
    wbc = 0;
    bc = floats_for(R * kT, 4);
    x = bc + floats_for(R * kT, 4);
    delta = x + p_chunk * ldx;
    fold_w = delta + R;
    c1 = fold_w + R;
    dot = c1 + kT;
    b_f32 = floats_for(dot + kT * p_chunk, 4);
    b_raw = b_f32 + (b_copy ? R * N : 0);
    x_raw = b_raw + floats_for(R * N, act_bytes);
    total = x_raw + floats_for(R * p_chunk, act_bytes);
  }
};

// Sum of d[lo .. hi-1], in ascending order (a decay exponent over consecutive entries).
__device__ __forceinline__ float sum_entries(const float* d, int lo, int hi) {
  float s = 0.f;
  for (int m = lo; m < hi; ++m) s += d[m];
  return s;
}

// CTAs per SM the register allocation must leave room for (as for the replay kernel: more CTAs in
// flight hide the per-CTA prologue). kT <= 4 fits 6 CTAs (80 registers) without spilling; kT = 8
// holds 8 C vectors per lane and fits 5 (96 registers, a 12-byte spill). The unbounded allocation
// gives 96 / 127 registers (5 / 4 CTAs). REPLAYSSM_M2_SPEC_MIN_CTAS overrides it for measurements.
template <int kT>
constexpr int spec_min_ctas() {
#ifdef REPLAYSSM_M2_SPEC_MIN_CTAS
  return REPLAYSSM_M2_SPEC_MIN_CTAS;
#else
  return kT >= 8 ? 5 : 6;
#endif
}

// Whether a launch's fold reads B_k from the fp32 copy (fold_b_copy_pays at spec_min_ctas CTAs per
// SM); a kernel template argument, as for the replay kernel (replay_b_copy).
template <int kT>
__host__ __device__ inline bool spec_b_copy(int R, int p_chunk, int N, int act_bytes) {
  const SpecSmem without(R, p_chunk, N, kT, act_bytes, false);
  return fold_b_copy_pays(without.total, R * N, act_bytes, spec_min_ctas<kT>());
}

template <typename Act, typename St, int N, int kWarps, int kT, bool kBCopy>
__global__ void __launch_bounds__(kWarps * 32, spec_min_ctas<kT>()) mamba2_spec_verify_kernel(const SpecVerifyParams sp, const int p_chunk) {
  using L = RowLayout<St, N>;
  using Stream = TileStream<St, N, kWarps>;
  constexpr int kThreads = kWarps * 32;
  constexpr int U = Stream::U;
  constexpr int KV = Stream::KV;
  constexpr int VE = Stream::VE;
  constexpr int kRowsPerIter = Stream::kRowsPerIter;
  constexpr int kKept = L::template kept_sums<kT>();
  static_assert(kT >= 1 && kT <= kMaxSpecTokens && (kT & (kT - 1)) == 0, "kT: a power of two up to kMaxSpecTokens");

  extern __shared__ __align__(16) float smem[];
  const ReplayParams& p = sp.replay;

  // Grid (P chunks, H, batch): no index divisions before the slot read.
  const int H = p.geo.H, P = p.geo.P, G = p.geo.G;
  const int chunk = blockIdx.x;
  const int h = blockIdx.y;
  const int row = blockIdx.z;
  const int g = h / (H / G);
  const int p0 = chunk * p_chunk;
  const int plen = min(p_chunk, P - p0);

  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int lr = lane % L::kLanesPerRow;  // lane within its row
  const int rw = lane / L::kLanesPerRow;  // row within the warp's load

  // First state loads go out before anything else: they depend on the slot only.
  St* const S = reinterpret_cast<St*>(p.state) + slot * p.state_stride + (static_cast<int64_t>(h) * P + p0) * N;
  const Stream stream{S, plen, warp, rw, lr, p.state_vec_aligned};
  uint4 raw[U][KV];
  stream.load(0, raw);

  const int R = p.ring_len;
  const int hist = p.hist[slot];
  const int start = p.start[slot];
  const bool flush = p.flush[slot] != 0;
  const int t0 = sp.cu_seqlens[row];
  const int n = sp.cu_seqlens[row + 1] - t0;
  // Values outside the contract (only a caller bug makes them; the CUDA path cannot check them
  // without a host sync): the row is skipped like an out-of-range slot.
  if (hist < 0 || start < 0 || start >= R || n < 1 || n > sp.max_tokens || n > kT || hist > R - n || t0 < 0 ||
      static_cast<int64_t>(t0) + n > sp.num_tokens)
    return;

  const SpecSmem lay(R, p_chunk, N, kT, sizeof(Act), kBCopy);
  float* const x_s = smem + lay.x;
  float* const delta_s = smem + lay.delta;
  float* const fold_w_s = smem + lay.fold_w;
  float* const wbc_s = smem + lay.wbc;  // [k][i], row stride kT
  float* const bc_s = smem + lay.bc;    // [k][i], row stride kT
  float* const c1_s = smem + lay.c1;
  float* const dot_s = smem + lay.dot;      // [i][pl], row stride p_chunk
  float* const b_f32 = smem + lay.b_f32;                         // [k][N], folded entries (flush rows, kBCopy)
  Act* const b_raw = reinterpret_cast<Act*>(smem + lay.b_raw);  // [k][N]
  Act* const x_raw = reinterpret_cast<Act*>(smem + lay.x_raw);  // [k][p_chunk]
  const int ldx = lay.ldx;

  const Act* const ring_x = reinterpret_cast<const Act*>(p.ring_x) + slot * p.ring_x_stride + static_cast<int64_t>(h) * R * P;
  const Act* const ring_B = reinterpret_cast<const Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
  const float* const ring_dt = p.ring_dt + slot * p.ring_dt_stride + static_cast<int64_t>(h) * R;
  const float A = p.layer.A[h];

  // Window token i of this row is token t0 + i of the packed inputs.
  const Act* const x_in = reinterpret_cast<const Act*>(p.tok.x) + static_cast<int64_t>(t0) * p.tok.x_stride + h * P;
  const Act* const B_in = reinterpret_cast<const Act*>(p.tok.B) + static_cast<int64_t>(t0) * p.tok.B_stride + g * N;
  const Act* const C_in = reinterpret_cast<const Act*>(p.tok.C) + static_cast<int64_t>(t0) * p.tok.C_stride + g * N;
  const Act* const dt_in = reinterpret_cast<const Act*>(p.tok.dt) + static_cast<int64_t>(t0) * p.tok.dt_stride + h;
  auto token_delta = [&](int i) {
    return make_delta(to_float(dt_in[static_cast<int64_t>(i) * p.tok.dt_stride]), p.layer.dt_bias, h, p.layer.dt_softplus);
  };

  // Stage the hist ring entries (logical order), then the n window tokens.
  const int n_ent = hist + n;
  const bool x_vec = p.entries_vec_aligned && (p_chunk * sizeof(Act)) % 16 == 0 && (plen * sizeof(Act)) % 16 == 0;
  stage_entries<Act, kThreads>(b_raw, N, EntryRows<Act>{ring_B, N, B_in, p.tok.B_stride, hist, start, R}, n_ent, N,
                               p.entries_vec_aligned, tid);
  stage_entries<Act, kThreads>(x_raw, p_chunk, EntryRows<Act>{ring_x + p0, P, x_in + p0, p.tok.x_stride, hist, start, R},
                               n_ent, plen, x_vec, tid);
  stage_ring_deltas<kThreads>(delta_s, ring_dt, hist, start, R, tid);
  cp_async_commit();
  for (int i = tid; i < n; i += kThreads) delta_s[hist + i] = token_delta(i);

  // C of every window token for this lane's n indices (zero past n: those sums are never written).
  float c_reg[kT][KV][VE];
#pragma unroll
  for (int i = 0; i < kT; ++i)
#pragma unroll
    for (int k = 0; k < KV; ++k)
#pragma unroll
      for (int e = 0; e < VE; ++e)
        c_reg[i][k][e] = i < n ? to_float(C_in[static_cast<int64_t>(i) * p.tok.C_stride + L::n_of(lr, k, e)]) : 0.f;

  // The window's ring entries at logical hist .. hist+n-1 (after the history, folded or not); x is
  // written with the outputs, from its staged copy. Nothing in this launch reads those positions:
  // history reads are at logical < hist, the window is staged from the inputs, and hist + n <= R
  // keeps the two apart.
  {
    if (chunk == 0) {
      float* const rdt = p.ring_dt + slot * p.ring_dt_stride + static_cast<int64_t>(h) * R;
      for (int i = tid; i < n; i += kThreads) rdt[ring_index_checked(start, hist + i, R)] = token_delta(i);
      if (h % (H / G) == 0) {  // one head per group writes the group's B
        Act* const rb = reinterpret_cast<Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
        for (int e = tid; e < n * N; e += kThreads) {
          const int i = e / N, nn = e % N;
          rb[static_cast<int64_t>(ring_index_checked(start, hist + i, R)) * N + nn] = B_in[static_cast<int64_t>(i) * p.tok.B_stride + nn];
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Decay weights (see the header comment), every exponent a sum over consecutive entries.
  const int e0 = flush ? hist : 0;
  if (flush)
    for (int j = tid; j < hist; j += kThreads) fold_w_s[j] = delta_s[j] * expf(A * sum_entries(delta_s, j + 1, hist));
  const float c0 = flush ? expf(A * sum_entries(delta_s, 0, hist)) : 1.f;
  for (int i = tid; i < n; i += kThreads) c1_s[i] = expf(A * sum_entries(delta_s, e0, hist + i + 1));

  // The replay weights w_ik of the entries k >= e0 and every token i of the tile (zero where k is
  // after token i's position hist + i, and for i >= n).
  for (int e = tid; e < (n_ent - e0) * kT; e += kThreads) {
    const int k = e0 + e / kT, i = e % kT, last = hist + i;  // window token i is entry hist + i
    wbc_s[k * kT + i] = (i < n && k <= last) ? delta_s[k] * expf(A * sum_entries(delta_s, k + 1, last + 1)) : 0.f;
  }

  // B_k . C_i of the same entries and tokens: kRowsPerWarp entries per warp pass.
  for (int jb = e0 + warp * L::kRowsPerWarp; jb < n_ent; jb += kWarps * L::kRowsPerWarp) {
    const int j = jb + rw;
    float part[kT];
#pragma unroll
    for (int i = 0; i < kT; ++i) part[i] = 0.f;
    if (j < n_ent) {
#pragma unroll
      for (int k = 0; k < KV; ++k) {
        float bv[VE];
        load_f32<Act, VE>(b_raw + j * N + L::n_of(lr, k, 0), bv);
#pragma unroll
        for (int e = 0; e < VE; ++e)
#pragma unroll
          for (int i = 0; i < kT; ++i) part[i] = fmaf(bv[e], c_reg[i][k][e], part[i]);
      }
    }
    L::template row_sums<kT>(part, lr);
    if (j < n_ent && L::template sum_holder<kT>(lr)) {
      const int first = L::template first_sum<kT>(lr);
#pragma unroll
      for (int m = 0; m < kKept; ++m) bc_s[j * kT + first + m] = part[m];
    }
  }
  __syncthreads();

  // The combined weights w_ik (B_k . C_i), read by the outputs after the stream.
  for (int e = e0 * kT + tid; e < n_ent * kT; e += kThreads) wbc_s[e] *= bc_s[e];

  // The fold's left factors s_j x_j[p] and its B_j in fp32 (flush rows: entries < e0, disjoint
  // from the replayed ones).
  if (flush) {
    for (int pl = tid; pl < plen; pl += kThreads)
      for (int j = 0; j < hist; ++j) x_s[pl * ldx + j] = fold_w_s[j] * to_float(x_raw[j * p_chunk + pl]);
    if constexpr (kBCopy)
      for (int e = tid; e < hist * N / 4; e += kThreads) {
        float v[4];
        load_f32<Act, 4>(b_raw + 4 * e, v);
        reinterpret_cast<float4*>(b_f32)[e] = make_float4(v[0], v[1], v[2], v[3]);
      }
    // Only the fold reads, in the stream, what other threads just wrote (the weight products are
    // read after the stream's barrier): non-flush CTAs skip this barrier (flush is CTA-uniform).
    __syncthreads();
  }

  const int n_upd = flush ? hist : 0;
  const bool write_state = flush && hist > 0;  // hist == 0: the fold is the identity
  const int iters = (plen + kRowsPerIter - 1) / kRowsPerIter;
  for (int it = 0; it < iters; ++it) {
    uint4 next[U][KV];
    if (it + 1 < iters) stream.load(it + 1, next);

    float acc[U][KV][VE];
    if (n_upd == 0) {
      Stream::unpack(raw, acc);  // c0 = 1 (non-flush rows, or nothing to fold)
    } else {
      Stream::unpack_scaled(raw, c0, acc);
      if constexpr (kBCopy)
        stream.add_rank_update(it, n_upd, b_f32, x_s, ldx, acc);
      else
        stream.add_rank_update(it, n_upd, b_raw, x_s, ldx, acc);
    }
    if (write_state) stream.store(it, acc);

    // The kT dot products of each state row with the window's C vectors: all U rows' sums reduced
    // together up to 16 sums (fewer shuffles than row by row; 32 would need 16 more live
    // registers), else row by row.
    if constexpr (U * kT <= 16) {
      constexpr int M = U * kT;
      float part[M];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int i = 0; i < kT; ++i) {
          float d = 0.f;
#pragma unroll
          for (int k = 0; k < KV; ++k)
#pragma unroll
            for (int e = 0; e < VE; ++e) d = fmaf(acc[u][k][e], c_reg[i][k][e], d);
          part[u * kT + i] = d;
        }
      L::template row_sums<M>(part, lr);
      if (L::template sum_holder<M>(lr)) {
        const int first_m = L::template first_sum<M>(lr);
#pragma unroll
        for (int m = 0; m < L::template kept_sums<M>(); ++m) {
          const int u = (first_m + m) / kT, i = (first_m + m) % kT;
          const int pl = stream.row_of(it, u);
          if (i < n && pl < plen) dot_s[i * p_chunk + pl] = part[m];
        }
      }
    } else {
      const bool holder = L::template sum_holder<kT>(lr);
      const int first = L::template first_sum<kT>(lr);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float part[kT];
#pragma unroll
        for (int i = 0; i < kT; ++i) {
          part[i] = 0.f;
#pragma unroll
          for (int k = 0; k < KV; ++k)
#pragma unroll
            for (int e = 0; e < VE; ++e) part[i] = fmaf(acc[u][k][e], c_reg[i][k][e], part[i]);
        }
        L::template row_sums<kT>(part, lr);
        const int pl = stream.row_of(it, u);
        if (holder && pl < plen) {
#pragma unroll
          for (int m = 0; m < kKept; ++m)
            if (first + m < n) dot_s[(first + m) * p_chunk + pl] = part[m];
        }
      }
    }

#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k) raw[u][k] = next[u][k];
  }
  __syncthreads();

  // Outputs: y_i[p] = c1_i (acc . C_i) + sum_{e0 <= k <= hist+i} w_ik (B_k . C_i) x_k[p] + D x_i[p],
  // one p per thread and every token at once (one pass over the entries for all kT sums); the
  // window's x goes to the ring alongside.
  const float D = p.layer.D != nullptr ? p.layer.D[h] : 0.f;
  const Act* const z_in = p.tok.z != nullptr ? reinterpret_cast<const Act*>(p.tok.z) + static_cast<int64_t>(t0) * p.tok.z_stride + h * P : nullptr;
  Act* const out = reinterpret_cast<Act*>(p.tok.out) + static_cast<int64_t>(t0) * p.tok.out_stride + h * P;
  Act* const rx = reinterpret_cast<Act*>(p.ring_x) + slot * p.ring_x_stride + static_cast<int64_t>(h) * R * P + p0;
  int ring_pos[kT];
#pragma unroll
  for (int i = 0; i < kT; ++i) ring_pos[i] = ring_index_checked(start, hist + min(i, n - 1), R);
  for (int pl = tid; pl < plen; pl += kThreads) {
    float ht[kT];
#pragma unroll
    for (int i = 0; i < kT; ++i) ht[i] = 0.f;
    for (int k = e0; k < n_ent; ++k) {
      float w[kT];
      load_smem_row<kT>(wbc_s + k * kT, w);
      const float xk = to_float(x_raw[k * p_chunk + pl]);
#pragma unroll
      for (int i = 0; i < kT; ++i) ht[i] = fmaf(w[i], xk, ht[i]);
    }
#pragma unroll
    for (int i = 0; i < kT; ++i) {
      if (i < n) {
        const Act x_tok = x_raw[(hist + i) * p_chunk + pl];
        float y = c1_s[i] * dot_s[i * p_chunk + pl] + ht[i] + D * to_float(x_tok);
        if (z_in != nullptr) y = gate(y, to_float(z_in[static_cast<int64_t>(i) * p.tok.z_stride + p0 + pl]));
        out[static_cast<int64_t>(i) * p.tok.out_stride + p0 + pl] = from_float<Act>(y);
        rx[static_cast<int64_t>(ring_pos[i]) * P + pl] = x_tok;
      }
    }
  }
}

}  // namespace replayssm::mamba2
