// The Mamba-2 speculative-verify kernel (mamba2_spec_verify): n <= T window tokens per row, the
// checkpoint streamed once for all n outputs.
//
// One CTA = one (row, chunk of P) of `heads` consecutive heads of one group: at small batch one
// head and a chunk of its P (as the replay kernel, replay_kernel.cuh), at serving batch a pair of
// whole heads where the launcher finds it pays (spec_heads_per_cta). The heads of a group share B
// and C, so the per-CTA work that depends only on them -- the slot and cursor reads, staging the
// B_k, the window's C in registers, the B_k . C_i products, the ring's B write -- is paid once per
// pair, and the stream is heads * P contiguous rows of the state (heads are adjacent in its
// layout). The state stream (TileStream of tile.cuh: 16-byte vectors, one iteration's loads in
// flight, the fold's rank update, the state write) is shared with the replay kernel; here it also
// asks L2 for the iterations the launcher's lead ahead (spec_l2_lead). With the
// row's entries numbered 0 .. hist+n-1 (the hist ring entries in logical order, then the n window
// tokens; window token i is entry hist+i) and e0 = hist on flush rows, 0 otherwise (entries below
// e0 are folded into the state tile, the rest are replayed per output), for each head:
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
// At the 4-token tile a lane holds the window's C vectors in its presorted token order (LaneSums:
// token i ^ tok_mask in c_reg[i]) and the sums of a stream iteration are token-major, so the
// halvings that split tokens need no selects: 24 of the iteration's 30 (session 15's ncu counted
// ~280 instructions per non-flush iteration, 62 of them the reduction). Same sums, same order of
// additions, so the outputs do not change by a bit (by construction; the tests compare them with
// the recurrence, not bitwise with the old kernel). H200, B = 16, fp32 checkpoint, batch 256, same
// run: nano 421.6 -> 412.6 us, super 458.2 -> 452.3 (aligned-view stream); at T = 2 the same
// change ran 2 % slower (nano 337.3 -> 343.9), so the other tiles keep the row-major sums.
//
// Tensor cores: with an fp32 checkpoint and bf16 activations at T = 5..8 (kMma; spec_mma.cuh) the
// state stream's products and the flush rows' fold run as bf16 mma from registers, and the B_k . C_i
// products as mma from the staged entries; the per-p replay sums stay on the CUDA cores. The other
// instances keep everything on the CUDA cores.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/common/smem_rows.cuh"
#include "replayssm/mamba2/entries.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/spec_mma.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Shared memory of one spec CTA of `heads` heads (tile rows = heads * p_chunk), in floats: the
// replay weights w_ik, then w_ik (B_k . C_i), [heads][R][kT] (kT contiguous, read as 16-byte
// vectors); B_k . C_i [R][kT]; the fold's left factors s_k x_k [R][rows rounded up to whole stream
// iterations] in TileStream::grouped_row order; delta_k and the
// fold weights s_k [heads][R] each; c1_i [heads][kT]; c0, A and D [heads] each; the state dot
// products [kT][rows]; the fold's B_k in fp32 [R][N] when b_copy (spec_b_copy); then the staged
// entries in the activation dtype, B_k [R][ldb] and x_k [heads][R][ldxr]. With pad_fold
// (kSpecFoldPadded) the left factors and the B copy have room for R - 1 rounded up to a multiple of
// 4 rows: the padded fold reads its entries in whole groups of four. The tensor-core stream
// (mma, spec_mma.cuh) folds from the staged entries directly: no left factors and no B copy, the
// staged rows padded for ldmatrix (ldmatrix_row_stride); it adds the window's C as bf16 rows [8][ldc]
// and 16 zero bytes for its ldmatrix rows past the history.
struct SpecSmem {
  int wbc, bc, x, ldx, delta, fold_w, c1, c0, a_h, d_h, dot, b_f32, b_raw, ldb, x_raw, ldxr, c_tile, ldc, zeros, total;
  __host__ __device__ SpecSmem(int R, int p_chunk, int N, int kT, int act_bytes, bool b_copy, int heads,
                               int rows_per_iter, bool mma = false, bool pad_fold = false) {
    const int rows = heads * p_chunk;
    // hist <= R - 1 (every row has a token): the padded fold reads up to round_up(R - 1, 4) entries.
    const int fold_rows = pad_fold && (R + 2) / 4 * 4 > R ? (R + 2) / 4 * 4 : R;
    ldx = grouped_table_rows(rows, rows_per_iter);
    ldb = mma ? ldmatrix_row_stride(N) : N;
    ldxr = mma ? ldmatrix_row_stride(p_chunk) : p_chunk;
    ldc = ldmatrix_row_stride(N);
    wbc = 0;
    bc = floats_for(heads * R * kT, 4);
    x = bc + floats_for(R * kT, 4);
    delta = x + (mma ? 0 : fold_rows * ldx);
    fold_w = delta + heads * R;
    c1 = fold_w + heads * R;
    c0 = c1 + heads * kT;
    a_h = c0 + heads;
    d_h = a_h + heads;
    dot = d_h + heads;
    b_f32 = floats_for(dot + kT * rows, 4);
    b_raw = b_f32 + (b_copy ? fold_rows * N : 0);
    x_raw = b_raw + floats_for(R * ldb, act_bytes);
    c_tile = x_raw + floats_for(heads * R * ldxr, act_bytes);
    zeros = c_tile + (mma ? floats_for(8 * ldc, 2) : 0);
    total = zeros + (mma ? 4 : 0);
  }
};

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

// The instances with a second CUDA-core stream compiled for 16-byte aligned state views
// (kVecStream; the launcher's spec_vec_stream picks it): an fp32 checkpoint at the 4-token tile,
// where the stream is bound by instruction issue (ncu, nano batch 256: ~50 % of warp samples in
// issue states, 4 % waiting on memory) and the per-row branches around the two load forms were
// ~40 of an iteration's ~280 instructions. Not with fp32 activations at N <= 64, where the pair
// instances spilled 184-232 bytes (ptxas; the run-time form there: 0-40).
template <typename Act, typename St, int N, int kT>
inline constexpr bool kSpecVecStream = sizeof(St) == 4 && kT == 4 && !(sizeof(Act) == 4 && N <= 64);

// The fold of the aligned-view stream's flush loop (N <= 128) from the fp32 B copy takes the
// entries in whole groups of four (TileStream::add_rank_update_padded), the rows past hist zero in
// the left factors and in the copy: no loop for the last hist % 4 entries, and the accumulators stay
// in the loop's registers (sm_90a SASS of super's T = 4 pairs: that loop 515 -> 363 instructions,
// its register moves 79 -> 8). H200, B = 16, T = 4, batch 256, three processes per build: super's
// flush step 645-649 -> 610-618 us, its cycle 396 -> 389.4-390.1; nano level; batch 1 +0.3-0.6 %
// (docs/perf-notes.md, Mamba-2 spec verify, "Session 42"). The shared memory of these instances
// (copy or not: the launcher decides the copy afterwards) rounds R up for it (SpecSmem's pad_fold).
template <typename Act, typename St, int N, int kT>
inline constexpr bool kSpecFoldPadded = kSpecVecStream<Act, St, N, kT> && N <= 128 && sizeof(Act) != 4;

// State rows per thread and stream iteration: RowLayout's (16 state values), halved where the
// window's kT C vectors over a lane's columns (kT kPerLane floats, held in registers) exceed 32
// values, doubled for a 2-byte state at T = 1. Without the halving, T = 8 spilled within the 96
// registers of 5 CTAs per SM: 48-480 bytes of stack for a 2-byte state, 120-128 for an fp32 state
// at N = 256 (ptxas); with it, nano T = 8 at batch 256 with a bf16 checkpoint ran 884.3 -> 713.4 us
// (H200, same run). At T = 1 a 2-byte state's 4 rows (32 values beside 8 C values) fit the 80
// registers of 6 CTAs per SM, and 2 rows ran 8 % slower there (251.2 -> 272.3 us). An fp32 state at
// N <= 128 keeps its 4 rows at every T.
template <typename St, int N, int kT>
constexpr int spec_rows_per_thread() {
  using L = RowLayout<St, N>;
  if constexpr (sizeof(St) == 2 && kT == 1) return 2 * L::kRowsPerThread;
  return kT * L::kPerLane > 32 && L::kRowsPerThread > 1 ? L::kRowsPerThread / 2 : L::kRowsPerThread;
}

// Rows of the CUDA-core stream per iteration (TileStream::kRowsPerIter of the kernel's stream), for
// the launcher's P chunk and shared-memory size.
template <typename St, int N, int kWarps, int kT>
constexpr int spec_rows_per_iteration() {
  return rows_per_iteration<St, N, kWarps, spec_rows_per_thread<St, N, kT>()>();
}

// Whether a launch's fold reads B_k from the fp32 copy (fold_b_copy_pays at spec_min_ctas CTAs per
// SM); a kernel template argument, as for the replay kernel (replay_b_copy).
template <int kT>
__host__ __device__ inline bool spec_b_copy(int R, int p_chunk, int N, int act_bytes, int heads, int rows_per_iter,
                                            bool pad_fold) {
  const SpecSmem without(R, p_chunk, N, kT, act_bytes, false, heads, rows_per_iter, false, pad_fold);
  const SpecSmem with(R, p_chunk, N, kT, act_bytes, true, heads, rows_per_iter, false, pad_fold);
  return fold_b_copy_pays(without.total, with.total - without.total, act_bytes, spec_min_ctas<kT>());
}

// kMma: the state stream on tensor cores (spec_mma.cuh; the launcher takes it where kSpecMma and
// spec_mma_choice allow it), else TileStream on the CUDA cores.
template <typename Act, typename St, int N, int kWarps, int kT, bool kBCopy, int kHeads, bool kMma = false,
          bool kVecStream = false>
__global__ void __launch_bounds__(kWarps * 32, spec_min_ctas<kT>())
    mamba2_spec_verify_kernel(const SpecVerifyParams sp, const int p_chunk) {
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)
  using L = RowLayout<St, N>;
  using Stream = TileStream<St, N, kWarps, spec_rows_per_thread<St, N, kT>()>;
  constexpr int kThreads = kWarps * 32;
  constexpr int U = Stream::U;
  constexpr int KV = Stream::KV;
  constexpr int VE = Stream::VE;
  constexpr int kRowsPerIter = Stream::kRowsPerIter;
  static_assert(kRowsPerIter == spec_rows_per_iteration<St, N, kWarps, kT>(), "the launcher sizes the tile by this");
  constexpr int kKept = L::template kept_sums<kT>();
  // The halvings that split window tokens, presorted at the 4-token tile (header comment).
  constexpr bool kPresortTokens = kT == 4;
  constexpr int kTokenLevels = kPresortTokens ? L::template halvings<kT>() : 0;
  static_assert(kT >= 1 && kT <= kMaxSpecTokens && (kT & (kT - 1)) == 0, "kT: a power of two up to kMaxSpecTokens");
  static_assert(kHeads == 1 || kHeads == 2 || (kHeads == 4 && kMma),
                "kHeads: one head (any P chunk), a pair of whole heads, or four on the tensor-core stream");
  static_assert(!kMma || (kSpecMma<Act, St, N, kT> && !kBCopy), "kMma: the kSpecMma instances, which fold without a B copy");
  static_assert(!kVecStream || (kSpecVecStream<Act, St, N, kT> && !kMma), "kVecStream: the CUDA-core stream of kSpecVecStream");
  // (Named for every instance, instantiated with N only where it is taken: N = 8, 16 have no units.)
  using MmaStream = SpecMmaStream<(kMma ? N : 32), kWarps, kHeads>;
  // A template argument: with the count known at run time the one-head CTAs ran ~7 % slower than
  // before heads were introduced (nano T = 4, batch 256: 484 vs 453 us, same run).
  constexpr int heads = kHeads;

  extern __shared__ __align__(16) float smem[];
  const ReplayParams& p = sp.replay;

  // Grid (P chunks, H / heads, batch): no index divisions before the slot read. heads is 1, or 2
  // with whole heads (one chunk, p_chunk == P; spec_heads_per_cta).
  const int H = p.geo.H, P = p.geo.P, G = p.geo.G;
  const int chunk = blockIdx.x;
  const int h0 = blockIdx.y * heads;
  const int row = blockIdx.z;
  const int g = h0 / (H / G);
  const int p0 = chunk * p_chunk;
  const int plen = min(p_chunk, P - p0);  // rows of each head
  const int tile_rows = heads * plen;     // contiguous in the state: heads are adjacent

  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int lr = lane % L::kLanesPerRow;  // lane within its row
  const int rw = lane / L::kLanesPerRow;  // row within the warp's load

  // First state loads go out before anything else: they depend on the slot only.
  St* const S = reinterpret_cast<St*>(p.state) + slot * p.state_stride + (static_cast<int64_t>(h0) * P + p0) * N;
  const Stream stream{S, tile_rows, warp, rw, lr, p.state_vec_aligned};
  uint4 raw[U][KV];
  const MmaStream mma_stream{reinterpret_cast<float*>(S), tile_rows, plen};
  typename MmaStream::Unit mma_cur;
  if constexpr (kMma) {
    mma_stream.first_unit(mma_cur);
  } else {
    stream.load(0, raw);
    // The lead's first iterations, on their way to L2 while the prologue runs (spec_l2_lead).
    if (sp.l2_lead_iters > 0) stream.prefetch_iters_l2(1, sp.l2_lead_iters);
  }

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

  const SpecSmem lay(R, p_chunk, N, kT, sizeof(Act), kBCopy, heads, kRowsPerIter, kMma, kSpecFoldPadded<Act, St, N, kT>);
  float* const x_s = smem + lay.x;
  float* const delta_s = smem + lay.delta;    // [hh][k], row stride R
  float* const fold_w_s = smem + lay.fold_w;  // [hh][k], row stride R
  float* const wbc_s = smem + lay.wbc;        // [hh][k][i], strides R kT and kT
  float* const bc_s = smem + lay.bc;          // [k][i], row stride kT
  float* const c1_s = smem + lay.c1;          // [hh][i], row stride kT
  float* const c0_s = smem + lay.c0;          // [hh]
  float* const a_s = smem + lay.a_h;          // [hh]: A of head h0 + hh
  float* const d_s = smem + lay.d_h;          // [hh]: D of head h0 + hh (0 without D)
  float* const dot_s = smem + lay.dot;        // [i][tile row], row stride tile_rows
  float* const b_f32 = smem + lay.b_f32;                         // [k][N], folded entries (flush rows, kBCopy)
  Act* const b_raw = reinterpret_cast<Act*>(smem + lay.b_raw);  // [k][N]
  Act* const x_raw = reinterpret_cast<Act*>(smem + lay.x_raw);  // [hh][k][ldxr], strides R ldxr and ldxr
  const int ldx = lay.ldx, ldb = lay.ldb, ldxr = lay.ldxr;

  // Head h of the slot's ring: x at ring_x + h R P, delta at ring_dt + h R.
  Act* const ring_x = reinterpret_cast<Act*>(p.ring_x) + slot * p.ring_x_stride;
  Act* const ring_B = reinterpret_cast<Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
  float* const ring_dt = p.ring_dt + slot * p.ring_dt_stride;

  // Window token i of this row is token t0 + i of the packed inputs; head h0 + hh at + hh P (x)
  // and + hh (dt).
  const Act* const x_in = reinterpret_cast<const Act*>(p.tok.x) + static_cast<int64_t>(t0) * p.tok.x_stride + h0 * P;
  const Act* const B_in = reinterpret_cast<const Act*>(p.tok.B) + static_cast<int64_t>(t0) * p.tok.B_stride + g * N;
  const Act* const C_in = reinterpret_cast<const Act*>(p.tok.C) + static_cast<int64_t>(t0) * p.tok.C_stride + g * N;
  const Act* const dt_in = reinterpret_cast<const Act*>(p.tok.dt) + static_cast<int64_t>(t0) * p.tok.dt_stride + h0;
  auto token_delta = [&](int i, int hh) {
    return make_delta(to_float(dt_in[static_cast<int64_t>(i) * p.tok.dt_stride + hh]), p.layer.dt_bias, h0 + hh,
                      p.layer.dt_softplus);
  };

  // Stage the hist ring entries (logical order), then the n window tokens: B once (the group's),
  // x and delta per head.
  const int n_ent = hist + n;
  const bool x_vec = p.entries_vec_aligned && (ldxr * sizeof(Act)) % 16 == 0 && (plen * sizeof(Act)) % 16 == 0;
  // kRolled: less code beside the stream loop (entries.cuh).
  stage_entries<Act, kThreads, true, N>(b_raw, ldb, EntryRows<Act>{ring_B, N, B_in, p.tok.B_stride, hist, start, R},
                                        n_ent, N, p.entries_vec_aligned, tid);
  for (int hh = 0; hh < heads; ++hh) {
    const int64_t h = h0 + hh;
    stage_entries<Act, kThreads, true>(
        x_raw + hh * R * ldxr, ldxr,
        EntryRows<Act>{ring_x + h * R * P + p0, P, x_in + hh * P + p0, p.tok.x_stride, hist, start, R}, n_ent, plen, x_vec,
        tid);
    stage_ring_deltas<kThreads, true>(delta_s + hh * R, ring_dt + h * R, hist, start, R, tid);
  }
  // The heads' A and D travel with the entries: read after the barrier, their loads would open
  // the weight pass and the outputs with a memory latency each.
  if (tid < heads) {
    cp_async4(a_s + tid, p.layer.A + h0 + tid);
    if (p.layer.D != nullptr)
      cp_async4(d_s + tid, p.layer.D + h0 + tid);
    else
      d_s[tid] = 0.f;
  }
  cp_async_commit();
  for (int e = tid; e < heads * kT; e += kThreads) {
    const int hh = e / kT, i = e % kT;
    if (i < n) delta_s[hh * R + hist + i] = token_delta(i, hh);
  }
  if constexpr (kMma) {
    if (tid < 4) smem[lay.zeros + tid] = 0.f;
    spec_mma_stage_c<N, kThreads>(reinterpret_cast<const __nv_bfloat16*>(C_in), p.tok.C_stride, n,
                                  reinterpret_cast<__nv_bfloat16*>(smem + lay.c_tile), lay.ldc);
  }

  // C of every window token for this lane's n indices (zero past n: those sums are never written),
  // token i ^ tok_mask in c_reg[i] (the presorted order of the reductions); the tensor-core stream
  // reads the staged C tile instead.
  float c_reg[kT][KV][VE];
  if constexpr (!kMma) {
    // (Only where presorted: the call alone, returning 0, changed nvcc's code for the T = 2 kernel.)
    int tok_mask = 0;
    if constexpr (kTokenLevels > 0) tok_mask = L::template presorted_mask<kT, kTokenLevels>(lr);
#pragma unroll
    for (int i = 0; i < kT; ++i) {
      const int tok = i ^ tok_mask;
#pragma unroll
      for (int k = 0; k < KV; ++k)
#pragma unroll
        for (int e = 0; e < VE; ++e)
          c_reg[i][k][e] = tok < n ? to_float(C_in[static_cast<int64_t>(tok) * p.tok.C_stride + L::n_of(lr, k, e)]) : 0.f;
    }
  }

  // The window's ring entries at logical hist .. hist+n-1 (after the history, folded or not); x is
  // written with the outputs and B after them, from their staged copies (the tensor-core stream's
  // B here). Nothing in this launch reads those positions: history reads are at logical < hist, the
  // window is staged from the inputs, and hist + n <= R keeps the two apart.
  if (chunk == 0) {
    // The deltas staged above by this same thread (e < heads kT <= kThreads): not a second inlined
    // softplus.
    for (int e = tid; e < heads * kT; e += kThreads) {
      const int hh = e / kT, i = e % kT;
      if (i < n) ring_dt[static_cast<int64_t>(h0 + hh) * R + ring_index_checked(start, hist + i, R)] = delta_s[hh * R + hist + i];
    }
    // The tensor-core stream's CTAs copy the group's B here, from the inputs, in the code they
    // had before session 29 (their SASS unchanged); the CUDA-core stream's, from the staged
    // rows, at the end of the kernel: see there. `rb` is ring_B computed again on purpose: writing
    // through ring_B instead rescheduled the tensor-core T = 8 instances (sm_90a SASS, session 30),
    // whose timings are those measured with this code.
    if constexpr (kMma) {
      if (h0 % (H / G) == 0) {  // the CTA of the group's first head writes the group's B
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

  // Decay weights of each head (see the header comment), every exponent a sum over consecutive
  // entries. One head (small batches): a task per (entry, token), each its own sum. Two or four
  // heads: a task per (head, entry), all heads at once, so that a thread's serial work is one chain
  // of adds: entry k's sums for tokens i = 0, 1, ... extend one another by d[hist + i] (the same
  // additions in the same order as a sum per (k, i)), and the entry before e0 stands for c1_i,
  // whose sums start at e0. Per head those tasks are that entry, the replayed entries e0 .. n_ent-1,
  // then on flush rows c0 and the fold weights s_j, j < hist. The loops per head took up to 16
  // chains in turn before the barrier (T = 8, four heads), on the CTA's path to its first stream
  // iteration. H200, B = 16, batch 256, same run, per (k, i) -> per (head, entry) for every
  // instance: nano T = 8 546.7 -> 531.9 us, super T = 4 417.1 -> 402.7, super T = 8 583.0 -> 562.9;
  // but batch 1 / 8 (one head per CTA) 1-5 % slower, hence one head keeps the per-(k, i) tasks
  // (docs/perf-notes.md, Mamba-2 spec verify, "Session 28").
  const int e0 = flush ? hist : 0;
  const int replay_tasks = n_ent - e0 + 1;                        // per head, with kHeads > 1
  const int tasks = replay_tasks + (flush ? hist + 1 : 0);        // per head, with kHeads > 1
  // Pair CTAs of the CUDA-core stream run the weight tasks on their last warps and the B_k . C_i
  // rows below on the others (bc_warps of them), side by side. At hist 8, T = 4 the tasks are 26,
  // one warp's lanes, each a chain of dependent shared loads, adds and expf; when warp 0 took them
  // and then its share of the B_k . C_i rows, the other three warps waited at the barrier after
  // those rows for about three times warp 0's weight pass (ncu, super T = 4 non-flush, batch 256:
  // 8.8 % of the warp samples at that barrier; bench/results/h200-2026-12-01-s29-dots-ncu/).
  constexpr bool kSplitWeights = kHeads == 2 && !kMma;
  int bc_warps = kWarps;
  if constexpr (kSplitWeights)
    if (heads * tasks <= (kWarps - 1) * 32) bc_warps = kWarps - (heads * tasks + 31) / 32;
  const int first_task_warp = bc_warps < kWarps ? bc_warps : 0;
  if constexpr (kHeads == 1) {
    // (Written as the loop over heads every instance had before: one-head code stays the same.)
    for (int hh = 0; hh < heads; ++hh) {
      const float A = a_s[hh];
      const float* const d = delta_s + hh * R;
      if (flush)
        for (int j = tid; j < hist; j += kThreads) fold_w_s[hh * R + j] = d[j] * expf(A * sum_entries(d, j + 1, hist));
      if (tid == 0) c0_s[hh] = flush ? expf(A * sum_entries(d, 0, hist)) : 1.f;
      for (int i = tid; i < n; i += kThreads) c1_s[hh * kT + i] = expf(A * sum_entries(d, e0, hist + i + 1));
      // The replay weights w_ik of the entries k >= e0 and every token i of the tile (zero where k
      // is after token i's position hist + i, and for i >= n).
      float* const w = wbc_s + hh * R * kT;
      for (int e = tid; e < (n_ent - e0) * kT; e += kThreads) {
        const int k = e0 + e / kT, i = e % kT, last = hist + i;  // window token i is entry hist + i
        w[k * kT + i] = (i < n && k <= last) ? d[k] * expf(A * sum_entries(d, k + 1, last + 1)) : 0.f;
      }
    }
  } else {
    if (!flush && tid < heads) c0_s[tid] = 1.f;
#pragma unroll 1
    for (int e = tid - first_task_warp * 32; e >= 0 && e < heads * tasks; e += kThreads - first_task_warp * 32) {
      // e's head by comparisons (heads <= 4), not an integer division by the run-time task count.
      int hh = 0;
#pragma unroll
      for (int k = 1; k < heads; ++k) hh += e >= k * tasks ? 1 : 0;
      const int t = e - hh * tasks;
      const float A = a_s[hh];
      const float* const d = delta_s + hh * R;
      if (t < replay_tasks) {
        const int k = e0 - 1 + t;  // e0 - 1: c1
        float s = sum_entries(d, k + 1, hist);  // 0 for window entries (k >= hist)
#pragma unroll
        for (int i = 0; i < kT; ++i) {
          const int last = hist + i;  // window token i is entry hist + i
          if (i < n && k < last) s += d[last];
          const float decay = expf(A * s);
          if (k < e0) {
            if (i < n) c1_s[hh * kT + i] = decay;
          } else {
            // Zero where k is after token i's position, and for i >= n.
            wbc_s[(hh * R + k) * kT + i] = (i < n && k <= last) ? d[k] * decay : 0.f;
          }
        }
      } else {
        const int j = t - replay_tasks;  // hist: c0
        if (j < hist)
          fold_w_s[hh * R + j] = d[j] * expf(A * sum_entries(d, j + 1, hist));
        else
          c0_s[hh] = expf(A * sum_entries(d, 0, hist));
      }
    }
  }

  // B_k . C_i of the same entries and tokens (the group's: once for all heads): kRowsPerWarp
  // entries per warp pass on warps 0 .. bc_warps-1 (on tensor cores with the tensor-core stream).
  if constexpr (kMma)
    spec_mma_bc<N, kWarps, kT>(reinterpret_cast<const __nv_bfloat16*>(b_raw), ldb,
                               reinterpret_cast<const __nv_bfloat16*>(smem + lay.c_tile), lay.ldc,
                               reinterpret_cast<const __nv_bfloat16*>(smem + lay.zeros), e0, n_ent, bc_s);
  for (int jb = e0 + warp * L::kRowsPerWarp; !kMma && (!kSplitWeights || warp < bc_warps) && jb < n_ent; jb += bc_warps * L::kRowsPerWarp) {
    const int j = jb + rw;
    float part[kT];
#pragma unroll
    for (int i = 0; i < kT; ++i) part[i] = 0.f;
    if (j < n_ent) {
#pragma unroll
      for (int k = 0; k < KV; ++k) {
        float bv[VE];
        load_f32<Act, VE>(b_raw + j * ldb + L::n_of(lr, k, 0), bv);
#pragma unroll
        for (int e = 0; e < VE; ++e)
#pragma unroll
          for (int i = 0; i < kT; ++i) part[i] = fmaf(bv[e], c_reg[i][k][e], part[i]);
      }
    }
    L::template row_sums<kT, kTokenLevels>(part, lr);
    if (j < n_ent && L::template sum_holder<kT>(lr)) {
      const int first = L::template first_sum<kT>(lr);
#pragma unroll
      for (int m = 0; m < kKept; ++m) bc_s[j * kT + first + m] = part[m];
    }
  }
  __syncthreads();

  // The combined weights w_ik (B_k . C_i) of each head, read by the outputs after the stream. This
  // loop and the fold's table fill below take a few trips per thread and stay rolled: their
  // unrolled copies were code beside the stream loop, which waits on instruction fetch (ncu, T = 4:
  // 12-19 % of warp samples; docs/perf-notes.md, Mamba-2 spec verify, "Session 26").
  for (int hh = 0; hh < heads; ++hh)
#pragma unroll 1
    for (int e = e0 * kT + tid; e < n_ent * kT; e += kThreads) wbc_s[hh * R * kT + e] *= bc_s[e];

  // The fold's left factors s_j x_j[p] of every tile row (its head's weights) and its B_j in fp32
  // (flush rows: entries < e0, disjoint from the replayed ones); for the padded fold
  // (kSpecFoldPadded) up to fold_entries, zero past hist in both (the window's own B rows, past
  // hist in the staging, never meet the fold: an inf there stays out of the checkpoint).
  constexpr bool kPaddedFold = kSpecFoldPadded<Act, St, N, kT> && kVecStream && kBCopy;
  const int fold_entries = kPaddedFold ? (hist + 3) / 4 * 4 : hist;
  if (flush) {
    if constexpr (!kMma) {
      // Every row of the last stream iteration is read with the others (one load per entry): the
      // rows past tile_rows hold zeros. One loop with the j loop kept rolled: the unrolled fill and
      // a second loop for the zeros made this kernel 250 instructions longer than with the
      // [row][odd(R)] table, and its instruction-fetch stalls doubled (ncu, nano T = 4 flush step).
      for (int pl = tid; pl < ldx; pl += kThreads) {
        const bool real = pl < tile_rows;
        const int hh = real ? head_of_row<kHeads>(pl, plen) : 0, pp = real ? pl - hh * plen : 0;
        float* const xg = x_s + Stream::grouped_row(pl);
#pragma unroll 1
        for (int j = 0; j < fold_entries; ++j) {
          const bool live = kPaddedFold ? real && j < hist : real;
          xg[j * ldx] = live ? fold_w_s[hh * R + j] * to_float(x_raw[(hh * R + j) * ldxr + pp]) : 0.f;
        }
      }
    }
    if constexpr (kPaddedFold) {
      for (int e = tid; e < fold_entries * N / 4; e += kThreads) {
        float v[4] = {0.f, 0.f, 0.f, 0.f};
        if (e < hist * N / 4) load_f32<Act, 4>(b_raw + 4 * e, v);
        reinterpret_cast<float4*>(b_f32)[e] = make_float4(v[0], v[1], v[2], v[3]);
      }
    } else if constexpr (kBCopy) {
      for (int e = tid; e < hist * N / 4; e += kThreads) {
        float v[4];
        load_f32<Act, 4>(b_raw + 4 * e, v);
        reinterpret_cast<float4*>(b_f32)[e] = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
    // Only the fold reads, in the stream, what other threads just wrote (the weight products are
    // read after the stream's barrier): non-flush CTAs skip this barrier (flush is CTA-uniform).
    __syncthreads();
  }

  const int n_upd = flush ? hist : 0;
  const bool write_state = flush && hist > 0;  // hist == 0: the fold is the identity
  if constexpr (kMma) {
    const MmaFold fold{write_state, hist, R, R, c0_s, fold_w_s, reinterpret_cast<const __nv_bfloat16*>(x_raw), ldxr,
                       reinterpret_cast<const __nv_bfloat16*>(b_raw), ldb,
                       reinterpret_cast<const __nv_bfloat16*>(smem + lay.zeros)};
    SpecMmaProducts products{reinterpret_cast<const __nv_bfloat16*>(smem + lay.c_tile), lay.ldc, n, dot_s, tile_rows};
    mma_stream.run(mma_cur, fold, products);
  }
  const int iters = kMma ? 0 : (tile_rows + kRowsPerIter - 1) / kRowsPerIter;
  // kVecStream (spec_vec_stream): launched on 16-byte aligned state views only, so the loads and
  // stores need no per-row test of the flag, and the warps without thread 0 skip the lead's bounds.
  const auto state_aligned = stream_alignment<kVecStream>(stream.aligned);
  const St* const lane_origin = stream.lane_origin();
  auto window_dots = [&](int it, const float (&acc)[U][KV][VE]) {
    // The kT dot products of each state row with the window's C vectors: all U rows' sums reduced
    // together up to 16 sums (fewer shuffles than row by row; 32 would need 16 more live
    // registers), else row by row. Presorted, they are token-major (sum i U + u), so the token bits
    // are the first halvings' and c_reg's order serves them; else row-major (sum u kT + i).
    if constexpr (U * kT <= 16) {
      constexpr int M = U * kT;
      auto sum_index = [](int u, int i) { return kPresortTokens ? i * U + u : u * kT + i; };
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
          part[sum_index(u, i)] = d;
        }
      L::template row_sums<M, kTokenLevels>(part, lr);
      if (L::template sum_holder<M>(lr)) {
        const int first_m = L::template first_sum<M>(lr);
#pragma unroll
        for (int m = 0; m < L::template kept_sums<M>(); ++m) {
          const int c = first_m + m;
          const int u = kPresortTokens ? c % U : c / kT, i = kPresortTokens ? c / U : c % kT;
          const int pl = stream.row_of(it, u);
          if (i < n && pl < tile_rows) dot_s[i * tile_rows + pl] = part[m];
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
        L::template row_sums<kT, kTokenLevels>(part, lr);
        const int pl = stream.row_of(it, u);
        if (holder && pl < tile_rows) {
#pragma unroll
          for (int m = 0; m < kKept; ++m)
            if (first + m < n) dot_s[(first + m) * tile_rows + pl] = part[m];
        }
      }
    }
  };
  auto l2_lead = [&](int it) {
    if (sp.l2_lead_iters > 0 && (!kVecStream || threadIdx.x == 0)) stream.prefetch_iters_l2(it + 1 + sp.l2_lead_iters, 1);
  };
  if (kVecStream && n_upd == 0) {
    // Rows that only read their state for the window's dot products (non-flush CTAs: flush is
    // CTA-uniform) on an aligned view: the decode's dot-only stream, two iterations' loads in
    // flight per warp (TileStream::dots_two_buffers). Rows past tile_rows are never stored.
    stream.dots_two_buffers(iters, raw, l2_lead, window_dots);
  } else {
    if constexpr (kVecStream && N <= 128) {
      // Only rows that fold come here. The next iteration's loads go into raw once its values
      // are scaled into acc, so the loop carries one set of load registers: with a second set
      // (loaded first and copied into raw at the end, as below) the flush loop of super's T = 4
      // pairs spent 16 register moves per iteration on the copy, and 34 of its 113 moves went
      // with it (sm_90a SASS, 565 -> 515 instructions; the flush step is issue-bound, ncu: issue
      // slots 76 % busy). H200, B = 16, T = 4, three processes per build: the flush step at batch
      // 256 nano 630-641 -> 619-624 us, super 673-677 -> 655-668, batch 512 -1 to -2 %; the cycle
      // nano 364-366 -> 360-360.5, super level (397-400); batch 1 +0.4-0.8 % (docs/perf-notes.md,
      // Mamba-2 spec verify, "Session 41"). Where rows that do not fold share the loop (acc is raw
      // itself there), and at N = 256, that order raised ptxas's spills: those keep the copy. The
      // two loops spell the scale and fold out each: shared as lambdas, they moved the register
      // allocation of the other instances (T = 2 SASS no longer main's).
      for (int it = 0; it < iters; ++it) {
        float acc[U][KV][VE];
        float c0[U];  // each row's head's (an iteration may span both heads)
#pragma unroll
        for (int u = 0; u < U; ++u) c0[u] = c0_s[head_of_row<kHeads>(stream.row_of(it, u), plen)];
        Stream::unpack_scaled(raw, c0, acc);
        if (it + 1 < iters) stream.load_from(lane_origin, it + 1, raw, state_aligned);
        l2_lead(it);
        if constexpr (kPaddedFold)
          stream.add_rank_update_padded(it, fold_entries, b_f32, x_s, ldx, acc);
        else if constexpr (kBCopy)
          stream.add_rank_update_grouped(it, n_upd, b_f32, x_s, ldx, acc);
        else
          stream.add_rank_update_grouped(it, n_upd, b_raw, x_s, ldx, acc);
        if (write_state) stream.store(it, acc, state_aligned);
        window_dots(it, acc);
      }
    } else {
      for (int it = 0; it < iters; ++it) {
        uint4 next[U][KV];
        if (it + 1 < iters) {
          if constexpr (kVecStream)
            stream.load_from(lane_origin, it + 1, next, state_aligned);
          else
            stream.load(it + 1, next, state_aligned);
        }
        l2_lead(it);

        float acc[U][KV][VE];
        if (n_upd == 0) {
          Stream::unpack(raw, acc);  // c0 = 1 (non-flush rows, or nothing to fold)
        } else {
          float c0[U];  // each row's head's (an iteration may span both heads)
#pragma unroll
          for (int u = 0; u < U; ++u) c0[u] = c0_s[head_of_row<kHeads>(stream.row_of(it, u), plen)];
          Stream::unpack_scaled(raw, c0, acc);
          if constexpr (kBCopy)
            stream.add_rank_update_grouped(it, n_upd, b_f32, x_s, ldx, acc);
          else
            stream.add_rank_update_grouped(it, n_upd, b_raw, x_s, ldx, acc);
        }
        if (write_state) stream.store(it, acc, state_aligned);
        window_dots(it, acc);

#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < KV; ++k) raw[u][k] = next[u][k];
      }
    }
  }
  __syncthreads();

  // Outputs: y_i[p] = c1_i (acc . C_i) + sum_{e0 <= k <= hist+i} w_ik (B_k . C_i) x_k[p] + D x_i[p],
  // one tile row per thread and every token at once (one pass over the entries for all kT sums);
  // the window's x goes to the ring alongside. Tile row pl is element h0 P + p0 + pl of a token's
  // (H, P) output (heads > 1 only with p0 = 0 and plen = P).
  const Act* const z_in = p.tok.z != nullptr ? reinterpret_cast<const Act*>(p.tok.z) + static_cast<int64_t>(t0) * p.tok.z_stride + h0 * P + p0 : nullptr;
  Act* const out = reinterpret_cast<Act*>(p.tok.out) + static_cast<int64_t>(t0) * p.tok.out_stride + h0 * P + p0;
  int ring_pos[kT];
#pragma unroll
  for (int i = 0; i < kT; ++i) ring_pos[i] = ring_index_checked(start, hist + min(i, n - 1), R);
  for (int pl = tid; pl < tile_rows; pl += kThreads) {
    const int hh = head_of_row<kHeads>(pl, plen), pp = pl - hh * plen;
    const float* const w_h = wbc_s + hh * R * kT;
    const Act* const x_h = x_raw + hh * R * ldxr;
    float ht[kT];
#pragma unroll
    for (int i = 0; i < kT; ++i) ht[i] = 0.f;
    for (int k = e0; k < n_ent; ++k) {
      float w[kT];
      load_smem_row<kT>(w_h + k * kT, w);
      const float xk = to_float(x_h[k * ldxr + pp]);
#pragma unroll
      for (int i = 0; i < kT; ++i) ht[i] = fmaf(w[i], xk, ht[i]);
    }
    const float D = d_s[hh];
    Act* const rx = ring_x + static_cast<int64_t>(h0 + hh) * R * P + p0 + pp;
#pragma unroll
    for (int i = 0; i < kT; ++i) {
      if (i < n) {
        const Act x_tok = x_h[(hist + i) * ldxr + pp];
        float y = c1_s[hh * kT + i] * dot_s[i * tile_rows + pl] + ht[i] + D * to_float(x_tok);
        if (z_in != nullptr) y = gate(y, to_float(z_in[static_cast<int64_t>(i) * p.tok.z_stride + pl]));
        out[static_cast<int64_t>(i) * p.tok.out_stride + pl] = from_float<Act>(y);
        rx[static_cast<int64_t>(ring_pos[i]) * P] = x_tok;
      }
    }
  }

  // The CTA of the group's first head writes the group's window B, from the rows staged at
  // hist .. hist+n-1. Read from the inputs before the first barrier, each thread's element copies
  // were n dependent global loads on the way to it, for every warp of the CTA (ncu, super T = 4
  // non-flush: 4 per thread, in one CTA of 8). At the end, where the stream's registers are free:
  // right after that barrier it made ptxas spill up to 180 bytes in the one-head T = 8 CUDA-core
  // instances at N = 256 (sm_90a). Here the tensor-core stream's pairs and quads spilled 40-128
  // bytes instead, so they keep the copy from the inputs. H200, batch 256, B = 16, same process
  // pair: T = 4 nano 372.0 -> 363.9 us, super 402.2 -> 396.4; batch 1 T = 4 -3.6 / -5.1 %; but
  // super batch 8 T = 4 +1.6-2.3 % (docs/perf-notes.md, Mamba-2 spec verify, "Session 29").
  if (!kMma && chunk == 0 && h0 % (H / G) == 0)
    write_ring_entries<Act, kThreads>(ring_B, N, b_raw + hist * ldb, ldb, n, N, hist, start, R, p.entries_vec_aligned, tid);
}

}  // namespace replayssm::mamba2
