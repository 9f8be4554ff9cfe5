// The Mamba-2 replay kernel: mamba2_decode (both routes, the flush fused per row) and
// mamba2_flush (fold on demand), one launch each.
//
// One CTA = one (row, head, chunk of P). Every row's work has the same shape:
//   acc   = c0 * S0 + sum_{j < n_upd} (s_j x_j[p]) B_j[n]     (a rank-n_upd update, often none)
//   state = acc                                               (flush rows only)
//   y[p]  = c1 * (acc . C) + hterm[p]                         (decode only)
// with, per row kind (docs/contract.md; the replay math of replayssm_ext/reference.py):
//   flush row (either route): fold the hist ring entries: c0 = exp(A sum_{i<hist} d_i), the
//       update over j < hist with s_j = d_j exp(A sum_{j<i<hist} d_i); then the new token from the
//       folded state: c1 = exp(A d), hterm = d (B.C) x + D x.
//   non-flush, output_only: no update, c0 = 1; over the history plus the new token (entries
//       j <= hist, the new one last) c1 = exp(A sum d_i), hterm = sum_j s_j (B_j.C) x_j + D x.
//   non-flush, state_and_output: the update over j <= hist with c0 = exp(A sum d_i), c1 = 1,
//       hterm = D x (the tile S_t is formed, not stored).
//   fold (mamba2_flush): as the flush row, without the output and the ring write.
// The state streams through registers in 16-byte vectors (TileStream / RowLayout of tile.cuh,
// shared with the spec kernel), one iteration's loads in flight ahead of the one being processed;
// the first iteration's loads go out as soon as the slot is known, then the row's entries (x_j, B_j,
// delta_j) are staged in shared memory with cp.async (entries.cuh), all in flight together.
// In the kStreamFirst instances (fp32 checkpoints, output-only launches) rows that do not flush
// stream first and form their entries' terms after, while the staging lands.
//
// Measured alternatives (H200, nano geometry, batch 256; docs/perf-notes.md): holding the whole
// chunk in shared memory via cp.async, and a persistent grid that prefetches the next item's
// cursors, were both slower than this register stream. So were two later tries, not kept:
//   - the rank update on the tensor cores (mma.sync m16n8k16 bf16, X split into three bf16 terms,
//     per-warp accumulator tiles in shared memory): the flush step was unchanged (ncu A/B, same
//     run: 606 vs 610 us; both at ~71 % DRAM throughput, so the fold is not what limits it) and the
//     state-and-output non-flush step slower (468 vs 432 us, longer dependent chains per warp);
//   - a bulk L2 prefetch (cp.async.bulk.prefetch) of the CTA's tile and ring at its start: every
//     kernel that had it slowed by 6-14 %, the classic step included (532 -> 567 us).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/mamba2/entries.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/replay_mma.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Shared memory of one CTA, in floats: the fold's left factors s_j x_j [R][p_chunk rounded up to
// whole stream iterations], rows in TileStream::grouped_row order (with the tensor-core update,
// mma_warps > 0: their A fragments, replay_mma_a_words); delta_j, s_j, B_j.C [R] each; the row
// dot products [p_chunk] (per warp with the tensor-core update: [mma_warps][p_chunk]) and the
// additive output terms [p_chunk]; the total decay [1]; 16 zero bytes (tensor-core update: the
// ldmatrix rows past the entries); the update's B_j in fp32 [R][N] when b_copy (replay_b_copy);
// then the staged entries in the activation dtype, B_j [R][ldb] (ldb = N, or
// ldmatrix_row_stride(N) for the tensor-core update's ldmatrix reads) and x_j [R][p_chunk].
// dot_over_x (the tensor-core update's nine-CTA instances): the per-warp dot products lie over the
// staged x_j instead, whose last reads (output terms, A fragments) come before the barrier that
// precedes the stream, whose tiles write the dot products. That is what lets nano's CTA (R = 17,
// p_chunk = 80: 25040 -> 23760 bytes) fit nine per SM.
struct ReplaySmem {
  int x, ldx, delta, weight, bc, dot, hterm, decay, zeros, c_mma, b_f32, b_raw, ldb, x_raw, total;
  __host__ __device__ ReplaySmem(int R, int p_chunk, int N, int act_bytes, bool b_copy, int rows_per_iter,
                                 int mma_warps = 0, bool dot_over_x = false) {
    const bool mma = mma_warps > 0;
    const int dot_floats = (mma ? mma_warps : 1) * p_chunk;
    ldx = grouped_table_rows(p_chunk, rows_per_iter);
    ldb = mma ? ldmatrix_row_stride(N) : N;
    x = 0;
    delta = x + (mma ? replay_mma_a_words(R, p_chunk) : R * ldx);
    weight = delta + R;
    bc = weight + R;
    dot = bc + R;
    hterm = dot + (dot_over_x ? 0 : dot_floats);
    decay = hterm + p_chunk;
    zeros = floats_for(decay + 1, 4);
    c_mma = zeros + (mma ? 4 : 0);  // the tensor-core stream's C in fp32 (ReplayMmaStream::store_c)
    b_f32 = c_mma + (mma ? N : 0);
    b_raw = b_f32 + (b_copy ? R * N : 0);
    x_raw = b_raw + floats_for(R * ldb, act_bytes);
    const int x_raw_floats = floats_for(R * p_chunk, act_bytes);
    if (dot_over_x) dot = x_raw;
    total = x_raw + (dot_over_x && dot_floats > x_raw_floats ? dot_floats : x_raw_floats);
  }
};

// CTAs per SM the register allocation must leave room for. The non-flush step is a read stream
// whose CTAs each spend a few memory latencies on their cursors and ring entries before streaming:
// bandwidth comes from many CTAs in flight, 8 of them (64 registers) rather than the 6 that the
// unbounded allocation (80 registers) allows: nano, batch 256, B = 16 output-only cycle 314 us vs
// 411 us unbounded (H200, same run). REPLAYSSM_M2_REPLAY_MIN_CTAS overrides it for measurements.
#ifndef REPLAYSSM_M2_REPLAY_MIN_CTAS
#define REPLAYSSM_M2_REPLAY_MIN_CTAS 8
#endif
constexpr int kReplayMinCtas = REPLAYSSM_M2_REPLAY_MIN_CTAS;
// The tensor-core update's second bound (its kNineCtas instances, taken where nine CTAs fit by
// shared memory: replay_mma_nine_choice): 56 registers on sm_90a (63 at kReplayMinCtas), 8 bytes
// of spill in the flush rows' tile loop since session 66 (ReplayMmaStream::run_tiles says why).
constexpr int kReplayMmaNineCtas = 9;

// Whether a launch's fold reads B_j from the fp32 copy (fold_b_copy_pays at kReplayMinCtas CTAs
// per SM). A kernel template argument rather than a run-time branch: both rank updates inlined in
// one kernel spilled 280 bytes at the 64-register bound (bf16 activations, N = 128).
__host__ __device__ inline bool replay_b_copy(int R, int p_chunk, int N, int act_bytes, int rows_per_iter) {
  const ReplaySmem without(R, p_chunk, N, act_bytes, false, rows_per_iter);
  return fold_b_copy_pays(without.total, R * N, act_bytes, kReplayMinCtas);
}

// The checkpoint dtypes with a kStreamFirst instance: fp32 only.
// With a 2-byte state the second copy of the entries' terms raised ptxas's spills at the
// 64-register bound (sm_90a, bf16 checkpoint, bf16 activations, N = 128, with the B copy: 28 / 116
// -> 64 / 224 bytes of spill stores / loads), so those instances keep the one order.
template <typename St>
inline constexpr bool kReplayStreamFirstBuilt = sizeof(St) == 4;

// kAlignedView: launched on 16-byte aligned state views only (the launcher checks), so every state
// load and store is one 16-byte access with no run-time test beside it. The kStreamFirst instances
// are all such; the entries-first ones are built both ways for the kReplayStreamFirstBuilt dtypes.
// kMmaUpdate: the rank update on tensor cores (replay_mma.cuh), for the state-and-output route's
// launches only (the launcher's replay_mma_choice): every row forms its state there.
// kNineCtas (kMmaUpdate only): bounded for kReplayMmaNineCtas CTAs per SM, with the dot products
// over the staged x_j (ReplaySmem's dot_over_x).
template <typename Act, typename St, int N, int kWarps, bool kBCopy, bool kStreamFirst, bool kAlignedView,
          bool kMmaUpdate = false, bool kNineCtas = false>
__global__ void __launch_bounds__(kWarps * 32, kNineCtas ? kReplayMmaNineCtas : kReplayMinCtas)
    mamba2_replay_kernel(const ReplayParams p, const int p_chunk) {
  static_assert(!kNineCtas || kMmaUpdate, "the nine-CTA bound is built for the tensor-core update only");
  static_assert(!kStreamFirst || kAlignedView, "the stream-first instances are built for aligned views");
  static_assert(!kMmaUpdate || (kReplayMma<Act, St, N, kWarps> && kAlignedView && !kStreamFirst && !kBCopy),
                "the tensor-core update is built for aligned fp32 views, bf16 activations, entries first");
  static_assert(!kAlignedView || kReplayStreamFirstBuilt<St>, "the aligned-view instances are built for fp32 checkpoints");
  using L = RowLayout<St, N>;
  using Stream = TileStream<St, N, kWarps>;
  constexpr int kThreads = kWarps * 32;
  constexpr int U = Stream::U;
  constexpr int KV = Stream::KV;
  constexpr int VE = Stream::VE;
  constexpr int kRowsPerIter = Stream::kRowsPerIter;

  extern __shared__ __align__(16) float smem[];

  // Grid (P chunks, H, batch): no index divisions on the way to the slot read
  // (chunk_head_row_grid, launch_impl.cuh).
  const int P = p.geo.P;
  const int chunk = blockIdx.x;
  const int h = blockIdx.y;
  const int row = blockIdx.z;
  const int g = h / p.geo.heads_per_group;
  const int p0 = chunk * p_chunk;
  const int plen = min(p_chunk, P - p0);

  // The step's own inputs (x, B, C, dt) depend on the row alone, not on its slot or cursors. The
  // instances that stage the entries first request this thread's elements of them before the
  // slot and keep them in registers: requested after the cursors, they put one more memory
  // latency before the entries' terms (the new entry's ring write and the dot products with C
  // wait for them). H200, same run, nano, B = 16: output-only cycle batch 1 6.35 -> 6.09 us,
  // batch 8 19.4 -> 16.8; state-and-output cycle batch 256 428.6 -> 412.5, batch 512 848.1 ->
  // 818.0 (bench/results/h200-2026-12-01-s24-inputs-first). A padding row
  // requests them too and exits without them. The kStreamFirst instances read them where they
  // are used: held in registers across the stream's start, they slowed the nano non-flush step
  // at batch 256 from 277 to 290 us, requested first or after the cursors alike
  // (bench/results/h200-2026-12-01-s23-token-first). The codegen is sensitive to the order of
  // these declarations: in a first merged form the entries-first instances had up to 118 more
  // register moves than the form that gained, and kept little of the gain.
  constexpr bool kInputsFirst = !kStreamFirst;
  const bool decode = p.mode != ReplayMode::kFold;
  auto step_input = [&](const void* base, int64_t row_stride, int offset) {
    return reinterpret_cast<const Act*>(base) + row * row_stride + offset;
  };
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int lr = lane % L::kLanesPerRow;  // lane within its row
  const int rw = lane / L::kLanesPerRow;  // row within the warp's load

  const Act* const x_in = decode ? step_input(p.tok.x, p.tok.x_stride, h * P) : nullptr;
  const Act* const B_in = decode ? step_input(p.tok.B, p.tok.B_stride, g * N) : nullptr;
  const Act* const C_in = decode ? step_input(p.tok.C, p.tok.C_stride, g * N) : nullptr;
  const Act* const dt_in = decode ? step_input(p.tok.dt, p.tok.dt_stride, h) : nullptr;
  const bool writes_B = decode && chunk == 0 && h == g * p.geo.heads_per_group;  // one head per group writes the group's B
  // The index arithmetic above needs no memory: formed before the wait for the grids ahead, it
  // overlaps their last wave where the launch is early (the addresses held in place by
  // hold_before_wait), and the first loads go out right after the wait. In the batch-1 instance
  // (sm_90a) that moved ~117 instructions, an integer division among them, from between the wait
  // and the first load to before the wait. H100, B = 16, base and tree in one call, twice: batch 1
  // state-and-output cycle nano 6.37 -> 6.09 / 6.35 -> 6.09 us, super 6.48 -> 6.19 / 6.51 -> 6.20,
  // output-only cycle -0.9 to -2 %; batch 8-256 level, the gates' errors identical
  // (bench/results/h100-2026-12-05-s51/, docs/perf-notes.md, Mamba-2 plain decode, "Session 51").
  hold_before_wait(x_in, B_in, C_in, dt_in, p0, plen, lr);
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)
  int32_t slot = -1;
  if constexpr (kStreamFirst) {
    slot = p.slots[row];
    if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  }

  Act dt_tok{}, x_tok{}, b_tok0{}, b_tok1{}, c_tok[KV][VE];  // kInputsFirst only
  float dt_bias = 0.f;
  if constexpr (kInputsFirst) {
    if (decode) {
      dt_tok = *dt_in;
      if (p.layer.dt_bias != nullptr) dt_bias = p.layer.dt_bias[h];
      if (tid < plen) x_tok = x_in[p0 + tid];
      if (writes_B && tid < N) b_tok0 = B_in[tid];
      if (writes_B && tid + kThreads < N) b_tok1 = B_in[tid + kThreads];
#pragma unroll
      for (int k = 0; k < KV; ++k)
#pragma unroll
        for (int e = 0; e < VE; ++e) c_tok[k][e] = C_in[kMmaUpdate ? mma_state_col(L::n_of(lr, k, e)) : L::n_of(lr, k, e)];
    }
    slot = p.slots[row];
    if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  }

  // First state loads go out before anything else: they depend on the slot only.
  St* const S = reinterpret_cast<St*>(p.state) + slot * p.state_stride + (static_cast<int64_t>(h) * P + p0) * N;
  const Stream stream{S, plen, warp, rw, lr, p.state_vec_aligned};
  // The kAlignedView instances (every kStreamFirst one among them) are launched on 16-byte aligned
  // state views only (replay_stream_first, launch_replay_typed): their loads and stores are then
  // one 16-byte access each, without the run-time test and the element-wise fallback beside every
  // one.
  const auto state_aligned = stream_alignment<kAlignedView>(stream.aligned);
  uint4 raw[U][KV];
  // Named in every instance, used in the kMmaUpdate ones only (the others get a stand-in width
  // that the type accepts: its N must be one 32-column unit per warp).
  using MmaStream = ReplayMmaStream<kMmaUpdate ? N : 32 * kWarps, kWarps>;
  const MmaStream mma_stream{{reinterpret_cast<float*>(S), plen, plen}, warp};
  typename MmaStream::Unit mma_cur;
  float c_mma[2][2][2];
  if constexpr (kMmaUpdate) {
    mma_stream.first_unit(mma_cur);
    mma_stream.load_c(reinterpret_cast<const __nv_bfloat16*>(step_input(p.tok.C, p.tok.C_stride, g * N)), c_mma);
  } else {
    stream.load(0, raw, state_aligned);
  }

  const ReplayMode mode = p.mode;
  const int R = p.ring_len;
  const int hist = p.hist[slot];
  const int start = p.start[slot];
  const bool flush = !decode || p.flush[slot] != 0;
  // Cursor values outside the contract (only a caller bug makes them; the CUDA path cannot check
  // them without a host sync): the row is skipped like an out-of-range slot.
  if (hist < 0 || start < 0 || start >= R || hist + (decode ? 1 : 0) > R) return;
  if (!decode && hist == 0) return;  // nothing to fold

  const ReplaySmem lay(R, p_chunk, N, sizeof(Act), kBCopy, kRowsPerIter, kMmaUpdate ? kWarps : 0, kNineCtas);
  float* const x_s = smem + lay.x;
  float* const delta_s = smem + lay.delta;
  float* const weight_s = smem + lay.weight;
  float* const bc_s = smem + lay.bc;
  float* const dot_s = smem + lay.dot;
  float* const hterm_s = smem + lay.hterm;
  float* const decay_s = smem + lay.decay;
  float* const b_f32 = smem + lay.b_f32;                         // [j][N], entries j < n_upd (kBCopy)
  Act* const b_raw = reinterpret_cast<Act*>(smem + lay.b_raw);  // [j][N]
  Act* const x_raw = reinterpret_cast<Act*>(smem + lay.x_raw);  // [j][p_chunk]
  const int ldx = lay.ldx, ldb = lay.ldb;

  const Act* const ring_x = reinterpret_cast<const Act*>(p.ring_x) + slot * p.ring_x_stride + static_cast<int64_t>(h) * R * P;
  const Act* const ring_B = reinterpret_cast<const Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
  const float* const ring_dt = p.ring_dt + slot * p.ring_dt_stride + static_cast<int64_t>(h) * R;
  const float A = p.layer.A[h];

  // Entries staged: the hist ring entries (logical order), then the new token (decode).
  const int n_ent = hist + (decode ? 1 : 0);
  float d_new = 0.f;
  if (decode)
    d_new = kInputsFirst ? biased_dt_to_delta(to_float(dt_tok) + dt_bias, p.layer.dt_softplus)
                         : make_delta(to_float(*step_input(p.tok.dt, p.tok.dt_stride, h)), p.layer.dt_bias, h,
                                      p.layer.dt_softplus);
  const bool x_vec = p.entries_vec_aligned && (p_chunk * sizeof(Act)) % 16 == 0 && (plen * sizeof(Act)) % 16 == 0;
  // The tensor-core update stages B_j in its column order (mma_staged_col); the lanes' C values for
  // B_j . C follow it (c_tok above).
  if constexpr (kMmaUpdate)
    stage_b_mma_order<kThreads>(b_raw, ldb, EntryRows<Act>{ring_B, N, B_in, 0, hist, start, R}, n_ent, N,
                                p.entries_vec_aligned, tid);
  else
    stage_entries<Act, kThreads, false, N>(b_raw, ldb, EntryRows<Act>{ring_B, N, B_in, 0, hist, start, R}, n_ent, N,
                                 p.entries_vec_aligned, tid);
  stage_entries<Act, kThreads>(x_raw, p_chunk, EntryRows<Act>{ring_x + p0, P, x_in + (decode ? p0 : 0), 0, hist, start, R},
                               n_ent, plen, x_vec, tid);
  stage_ring_deltas<kThreads>(delta_s, ring_dt, hist, start, R, tid);
  cp_async_commit();
  if (decode && tid == 0) delta_s[hist] = d_new;

  // C for this lane's n indices (decode only).
  float c_reg[KV][VE];
  if (decode) {
#pragma unroll
    for (int k = 0; k < KV; ++k)
#pragma unroll
      for (int e = 0; e < VE; ++e) c_reg[k][e] = to_float(kInputsFirst ? c_tok[k][e] : C_in[L::n_of(lr, k, e)]);
  }

  // The new ring entry at logical hist (after the history, folded or not). Nothing in this launch
  // reads that position: history reads are at logical < hist and hist + 1 <= R.
  if (decode) {
    const int pos = ring_index_checked(start, hist, R);
    Act* const rx = reinterpret_cast<Act*>(p.ring_x) + slot * p.ring_x_stride + (static_cast<int64_t>(h) * R + pos) * P;
    int pl = tid;
    if constexpr (kInputsFirst) {
      if (tid < plen) rx[p0 + tid] = x_tok;
      pl += kThreads;
    }
    for (; pl < plen; pl += kThreads) rx[p0 + pl] = x_in[p0 + pl];
    if (chunk == 0 && tid == 0) p.ring_dt[slot * p.ring_dt_stride + static_cast<int64_t>(h) * R + pos] = d_new;
    if (writes_B) {
      Act* const rb = reinterpret_cast<Act*>(p.ring_B) + slot * p.ring_B_stride + (static_cast<int64_t>(g) * R + pos) * N;
      int n = tid;
      if constexpr (kInputsFirst) {
        if (tid < N) rb[tid] = b_tok0;
        if (tid + kThreads < N) rb[tid + kThreads] = b_tok1;
        n += 2 * kThreads;
      }
      for (; n < N; n += kThreads) rb[n] = B_in[n];
    }
  }

  // Per row kind: the update size and the coefficients' roles.
  int n_upd;
  if (flush)
    n_upd = hist;
  else if (mode == ReplayMode::kOutputOnly)
    n_upd = 0;
  else
    n_upd = n_ent;
  // An output-only row that does not flush reads its state only for the dot products with C (no
  // update, c0 = 1), which need neither the staged entries nor the decay weights. In the
  // kStreamFirst instances its stream runs first and the entries' wait, weights, B_j . C and
  // output terms after it, so the staging's latency overlaps the stream instead of standing
  // before its first iteration (the per-CTA chain slot -> cursors -> entries -> weights -> stream
  // that limits this step; docs/perf-notes.md). Every thread takes the same branch: flush is per
  // row.
  static_assert(!kStreamFirst || kReplayStreamFirstBuilt<St>, "the stream-first order is built for fp32 checkpoints");
  const bool stream_first = kStreamFirst && decode && !flush && mode == ReplayMode::kOutputOnly;
  // c0 scales the state before the update, c1 its dot products with C (stream_first: c0 = 1, and
  // c1 is set after the stream).
  float c0 = 1.f, c1 = 1.f;
  // Waits for the staged entries, then the decay weights, the fp32 B copy, B_j . C, the per-row
  // output terms and update factors (a barrier), and c0, c1.
  auto entry_terms = [&]() {
    cp_async_wait<0>();
    if constexpr (kMmaUpdate) {
      permute_b_mma_order<kThreads>(b_raw, ldb, n_ent, N, p.entries_vec_aligned, tid);
      mma_stream.store_c(c_mma, smem + lay.c_mma);
    }
    __syncthreads();

    // Decay weights over the first n_w entries (the folded history for flush rows, everything for
    // non-flush rows): s_j = d_j exp(A sum_{j<i<n_w} d_i), total decay exp(A sum_{i<n_w} d_i).
    // The thread of entry 0 also leaves the total, read after the next barrier (n_w == 0: no decay).
    const int n_w = flush ? hist : n_ent;
    if (tid == 0 && n_w == 0) *decay_s = 1.f;
    for (int j = tid; j < n_w; j += kThreads) {
      const float later = sum_entries(delta_s, j + 1, n_w);
      weight_s[j] = delta_s[j] * expf(A * later);
      if (j == 0) *decay_s = expf(A * (later + delta_s[0]));
    }

    // The update's B_j in fp32, converted once rather than in every stream iteration (when that
    // costs no occupancy: replay_b_copy).
    if constexpr (kBCopy)
      for (int e = tid; e < n_upd * N; e += kThreads) b_f32[e] = to_float(b_raw[e]);

    // B_j . C (decode), kRowsPerWarp entries per warp pass, for the entries whose products the
    // output terms below read: every entry of an output-only row that does not flush, the new
    // token's alone on a flush row, none on a state-and-output row that does not flush (its output
    // is read from the formed state). Each costs a warp pass of loads, FMAs and shuffles; all
    // n_ent were taken on every row before (session 45).
    if (decode) {
      const int bc_first = flush ? hist : 0;
      const int bc_end = flush || mode == ReplayMode::kOutputOnly ? n_ent : 0;
      for (int jb = bc_first + warp * L::kRowsPerWarp; jb < bc_end; jb += kWarps * L::kRowsPerWarp) {
        const int j = jb + rw;
        float part = 0.f;
        if (j < bc_end) {
#pragma unroll
          for (int k = 0; k < KV; ++k) {
            float bv[VE];
            load_f32<Act, VE>(b_raw + j * ldb + L::n_of(lr, k, 0), bv);
#pragma unroll
            for (int e = 0; e < VE; ++e) part = fmaf(bv[e], c_reg[k][e], part);
          }
        }
        part = L::row_sum(part);
        if (j < bc_end && lr == 0) bc_s[j] = part;
      }
    }
    __syncthreads();

    const float D = (decode && p.layer.D != nullptr) ? p.layer.D[h] : 0.f;
    for (int pl = tid; pl < plen; pl += kThreads) {
      const float x_new = decode ? to_float(x_raw[hist * p_chunk + pl]) : 0.f;
      float ht = D * x_new;
      if (flush) {
        if (decode) ht += d_new * bc_s[hist] * x_new;
      } else if (mode == ReplayMode::kOutputOnly) {
        for (int j = 0; j < n_ent; ++j) ht = fmaf(weight_s[j] * bc_s[j], to_float(x_raw[j * p_chunk + pl]), ht);
      }
      if constexpr (!kMmaUpdate) {
        float* const xg = x_s + Stream::grouped_row(pl);
        for (int j = 0; j < n_upd; ++j) xg[j * ldx] = weight_s[j] * to_float(x_raw[j * p_chunk + pl]);  // the update's left factor
      }
      hterm_s[pl] = ht;
    }
    if constexpr (kMmaUpdate) {
      uint32_t* const a_frag = reinterpret_cast<uint32_t*>(x_s);
      if (flush && hist > 0) {  // write_state (below): the stored fold reads all three terms
        replay_mma_build_a<kThreads, 3>(a_frag, weight_s, x_raw, p_chunk, plen, n_upd, tid);
      } else {
        replay_mma_build_a<kThreads, 2>(a_frag, weight_s, x_raw, p_chunk, plen, n_upd, tid);
      }
      if (tid < 4) smem[lay.zeros + tid] = 0.f;
    } else {
      // The last iteration's rows past plen are read with the others (one load per entry): zeros.
      for (int pl = plen + tid; pl < ldx; pl += kThreads)
        for (int j = 0; j < n_upd; ++j) x_s[j * ldx + Stream::grouped_row(pl)] = 0.f;
    }
    __syncthreads();

    const float decay_all = *decay_s;
    if (flush) {
      c0 = decay_all;
      c1 = expf(A * d_new);
    } else if (mode == ReplayMode::kOutputOnly) {
      c0 = 1.f;
      c1 = decay_all;
    } else {
      c0 = decay_all;
      c1 = 1.f;
    }
  };
  if (!stream_first) entry_terms();

  const bool write_state = flush && hist > 0;  // hist == 0: the fold is the identity
  const int iters = (plen + kRowsPerIter - 1) / kRowsPerIter;
  // The U rows' dot products with C, reduced together (RowLayout::row_sums), into dot_s.
  auto row_dots = [&](int it, const float (&acc)[U][KV][VE]) {
    float part[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      part[u] = 0.f;
#pragma unroll
      for (int k = 0; k < KV; ++k)
#pragma unroll
        for (int e = 0; e < VE; ++e) part[u] = fmaf(acc[u][k][e], c_reg[k][e], part[u]);
    }
    L::template row_sums<U>(part, lr);
    if (L::template sum_holder<U>(lr)) {
      const int first = L::template first_sum<U>(lr);
#pragma unroll
      for (int m = 0; m < L::template kept_sums<U>(); ++m) {
        const int pl = stream.row_of(it, first + m);
        if (pl < plen) dot_s[pl] = part[m];
      }
    }
  };
  if constexpr (kMmaUpdate) {
    mma_stream.run(mma_cur, c0, n_upd, write_state, reinterpret_cast<const uint32_t*>(x_s), b_raw, ldb,
                   reinterpret_cast<const Act*>(smem + lay.zeros), smem + lay.c_mma, dot_s, p_chunk);
  } else if (stream_first) {
    // The state is read for its dot products with C alone (c0 = 1, no update, no store), so a loop
    // of its own keeps the scale, the update's test and the store's test out of every iteration,
    // and keeps two iterations' loads in flight per warp (TileStream::dots_two_buffers; the view is
    // aligned here, kStreamFirst). H200, B = 16, output-only cycle batch 256, each step measured
    // against its base in one run: nano 296.8 -> 290.9 (a loop of its own, one buffer) -> 282.6 us
    // (two), super 333.3 -> 317.7 -> 307.3 (bench/results/h200-2026-12-01-s24-inputs-first).
    stream.dots_two_buffers(iters, raw, [](int) {}, row_dots);
  } else {
    for (int it = 0; it < iters; ++it) {
      uint4 next[U][KV];
      if (it + 1 < iters) stream.load(it + 1, next, state_aligned);

      float acc[U][KV][VE];
      Stream::unpack_scaled(raw, c0, acc);
      if (n_upd > 0) {
        if constexpr (kBCopy)
          stream.add_rank_update_grouped(it, n_upd, b_f32, x_s, ldx, acc);
        else
          stream.add_rank_update_grouped(it, n_upd, b_raw, x_s, ldx, acc);
      }
      if (write_state) stream.store(it, acc, state_aligned);
      if (decode) row_dots(it, acc);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < KV; ++k) raw[u][k] = next[u][k];
    }
  }
  if (!decode) return;
  // Either way a barrier stands between the stream's dot_s writes and the reads below.
  if (stream_first) {
    entry_terms();
  } else {
    __syncthreads();
  }
  const Act* const z_in = p.tok.z != nullptr ? reinterpret_cast<const Act*>(p.tok.z) + row * p.tok.z_stride + h * P : nullptr;
  Act* const out = reinterpret_cast<Act*>(p.tok.out) + row * p.tok.out_stride + h * P;
  for (int pl = tid; pl < plen; pl += kThreads) {
    float dot = dot_s[pl];
    if constexpr (kMmaUpdate)  // the warps' partials over their columns, in a fixed order
#pragma unroll
      for (int w = 1; w < kWarps; ++w) dot += dot_s[w * p_chunk + pl];
    float y = c1 * dot + hterm_s[pl];
    if (z_in != nullptr) y = gate(y, to_float(z_in[p0 + pl]));
    out[p0 + pl] = from_float<Act>(y);
  }
}

}  // namespace replayssm::mamba2
