// mamba2_decode's output-only route on small grids (batch 1-2 of the model geometries): every warp
// forms its own rows' outputs from registers and warp shuffles, so a row that does not flush goes
// from its slot to its outputs through one CTA barrier (the B_j . C sums) and no staging.
//
// At batch 1 a step is a chain of memory latencies, not a stream: the replay kernel's CTA (16 rows
// of one head) stages its ring entries in shared memory after its cursors, then forms the decay
// weights, B_j . C and the per-row terms in passes split by three barriers, each pass waiting for
// its slowest warp. Here the ring's R positions are requested with the cursors, right after the
// slot, each warp holds four rows and the ring's x and delta (one position per lane), and the
// warps split the B_j . C sums, each warp's B entries copied to shared memory together. Session 53
// (H100, nano batch 1, B = 16): non-flush step 5.86 -> 4.89 us, cycle 6.11 -> 5.33, with the flush
// step (this prefix, then the replay kernel's code from its start) 8.90 -> 12.05. Session 54: the
// B entries by cp.async (in registers they had been waited for one at a time), flushing rows
// folded here and the decay-weight scan before the barrier: non-flush 4.89 -> 4.65, flush 12.11 ->
// 8.02, cycle 5.39 -> 4.87 (docs/perf-notes.md, Mamba-2 plain decode, "Session 54"). Session 55:
// the copies requested before the state loads, and the token's B written from its copy: non-flush
// 4.63 -> 4.06, flush 8.01 -> 7.09, cycle 4.86 -> 4.31 ("Session 55").
//
// Per row p of the warp (output-only, non-flush; replay_kernel.cuh's header gives the math):
//   y[p] = exp(A sum_j d_j) (S0[p] . C) + sum_j s_j (B_j . C) x_j[p] + D x[p]
// over the entries j <= hist (the ring's history, then the new token), s_j = d_j exp(A sum_{i>j} d_i).
// Lane j holds entry j (d_j, x_j of the warp's rows); lane l holds columns 4l .. 4l + 3 of the state
// rows, C and each B_j. The row sums of the warp's four rows are reduced together
// (LaneSums<32>::row_sums<4>): lane l ends with row l / 8's sum.
//
// Rows that flush (a per-slot flag, read here) take the same outputs and fold their history into
// the checkpoint, every position's B columns read from the shared copies, so one launch still
// serves any mix of phases. Built for an fp32 checkpoint on a 16-byte aligned view, dstate 128
// (one 16-byte state vector per lane and row), rings of at most 31 entries (one lane each, the new
// token in lane R) and entries whose rows are 16-byte aligned (B_j copied in one vector per lane);
// the launcher (replay_warp_rows_choice, launch_impl.cuh) checks all of it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/common/lane_sums.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/rows_cta.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Four values of Act (one 8- or 16-byte vector) from global to shared memory by cp.async.
template <typename Act>
__device__ __forceinline__ void copy_raw4(Raw4<Act>* smem_dst, const Act* gmem_src) {
  if constexpr (sizeof(Raw4<Act>) == 16) {
    cp_async16(smem_dst, gmem_src);
  } else {
    cp_async8(smem_dst, gmem_src);
  }
}

constexpr int kWarpRowsEntriesPerWarp = 8;  // B_j . C sums per warp: eight reduce together over 32 lanes
constexpr int kWarpRowsMaxEntries = 4 * kWarpRowsEntriesPerWarp;  // the ring's positions and the new token
constexpr int kWarpRowsMaxRing = kWarpRowsMaxEntries - 1;  // one ring position per lane

// Over a warp whose lane j holds d_j: the sum of d_i over the lanes i > j.
__device__ __forceinline__ float later_sum(float d, int lane) {
  const float next = __shfl_down_sync(0xffffffffu, d, 1);
  return warp_suffix_sum(lane == 31 ? 0.f : next, lane);
}

// Batch 2 of the model geometries is 7.3 CTAs per SM (nano: 960 CTAs on 132 SMs): eight fit one
// wave where the fold patch's unbounded 121 registers (4 CTAs per SM) took two, 24 % slower (session
// 54). Under the bound the fold reads its state rows again instead of keeping them in registers.
constexpr int kWarpRowsMinCtas = 8;

// One CTA of an output-only decode launch: the chunk p_chunk of one head of one row.
template <typename Act, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, kWarpRowsMinCtas) mamba2_decode_rows_kernel(const ReplayParams p, const int p_chunk) {
  constexpr int N = RowsCta::kN;
  constexpr int kCols = RowsCta::kCols;
  static_assert(kWarps * kWarpRowsEntriesPerWarp >= kWarpRowsMaxEntries, "the warps cover every ring position");
  using Sums = LaneSums<32>;
  const auto [chunk, h, row, g, p0, plen, warp, lane, r0, own_row] = RowsCta(p.geo, p_chunk);
  const int P = p.geo.P;
  const bool writes_row = (lane & 7) == 0 && own_row < plen;
  const Act* const x_in = reinterpret_cast<const Act*>(p.tok.x) + row * p.tok.x_stride + h * P + p0;
  const Act* const B_in = reinterpret_cast<const Act*>(p.tok.B) + row * p.tok.B_stride + g * N;
  const Act* const C_in = reinterpret_cast<const Act*>(p.tok.C) + row * p.tok.C_stride + g * N + kCols * lane;
  const Act* const dt_in = reinterpret_cast<const Act*>(p.tok.dt) + row * p.tok.dt_stride + h;
  hold_before_wait(x_in, B_in, C_in, dt_in, p0, plen, own_row);
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)

  // The row's own inputs, then the slot: none of them waits for another.
  const Act dt_tok = *dt_in;
  const float dt_bias = p.layer.dt_bias != nullptr ? p.layer.dt_bias[h] : 0.f;
  const float A = p.layer.A[h];
  const float D = p.layer.D != nullptr ? p.layer.D[h] : 0.f;
  float c[kCols];
#pragma unroll
  for (int e = 0; e < kCols; ++e) c[e] = to_float(C_in[e]);
  const Act x_own = own_row < plen ? x_in[own_row] : Act{};
  const Act* const z_in = p.tok.z != nullptr ? reinterpret_cast<const Act*>(p.tok.z) + row * p.tok.z_stride + h * P + p0 : nullptr;
  const float z_own = z_in != nullptr && own_row < plen ? to_float(z_in[own_row]) : 0.f;
  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;

  // B_i at the lane's columns, as stored, for every entry i <= R (the new token's at R): the warps
  // split them (warp w takes i = w + kWarps m), copied straight to shared memory, each warp's eight
  // in flight together. Loaded into registers, under the 64-register bound they were waited for
  // one by one, a memory latency each (five in a row at B = 16; session 54, in the SASS). A
  // flushing row's fold reads all of them after the barrier. Requested first, while few registers
  // are taken: behind the state loads ptxas formed each copy's address again (~30 instructions
  // per copy); the ring's positions come from one base and fixed offsets, the token's on its own.
  const int R = p.ring_len;
  const Act* const ring_B = reinterpret_cast<const Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
  __shared__ Raw4<Act> b_s[kWarpRowsMaxEntries][32];
  {
    const Act* const ring_B_w = ring_B + static_cast<int64_t>(warp) * N + kCols * lane;
#pragma unroll
    for (int m = 0; m < kWarpRowsEntriesPerWarp; ++m)
      if (warp + kWarps * m < R) copy_raw4<Act>(&b_s[warp + kWarps * m][lane], ring_B_w + kWarps * m * N);
    if (warp == R % kWarps) copy_raw4<Act>(&b_s[R][lane], B_in + kCols * lane);
    cp_async_commit();
  }

  // The warp's state rows (evict-first: read once per step), and the slot's cursors.
  float* const S = reinterpret_cast<float*>(p.state) + slot * p.state_stride + (static_cast<int64_t>(h) * P + p0 + r0) * N +
                   kCols * lane;
  float4 s[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    s[q] = r0 + q < plen ? __ldcs(reinterpret_cast<const float4*>(S + q * N)) : make_float4(0.f, 0.f, 0.f, 0.f);
  const int hist = p.hist[slot];
  const int start = p.start[slot];
  const int8_t flush = p.flush[slot];

  // The ring's R entries by physical position, lane i holding position i, and the new token's x in
  // lane R (R <= 31), requested beside the cursors rather than after them (they depend on the slot
  // alone): one memory latency fewer before the entries' terms. Once the cursors are in, lane j
  // takes logical entry j's values from the lane of its position. Positions past the history are
  // read too.
  const Act* const ring_x = reinterpret_cast<const Act*>(p.ring_x) + slot * p.ring_x_stride + static_cast<int64_t>(h) * R * P;
  float* const ring_dt = p.ring_dt + slot * p.ring_dt_stride + static_cast<int64_t>(h) * R;
  float d_pos = 0.f, x_pos[RowsCta::kRowsPerWarp] = {};
  if (lane < R) d_pos = ring_dt[lane];
  if (lane <= R) {
    const Act* const xr = lane < R ? ring_x + static_cast<int64_t>(lane) * P + p0 : x_in;
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
      if (r0 + q < plen) x_pos[q] = to_float(xr[r0 + q]);
  }

  // Lane j's logical entry (j <= hist: the history, then the new token from lane R): its delta and
  // its x at the warp's rows, zeros past it; then the decay weights: the sum of the later entries'
  // deltas by a suffix scan over the lanes, s_j = d_j exp(A later_j), the total decay from lane 0's.
  // None of it waits for the B_j . C sums, so it all comes before the barrier, beside the copies'
  // and the state's latency. (Cursors outside the contract give garbage here, dropped below.)
  const float d_new = biased_dt_to_delta(to_float(dt_tok) + dt_bias, p.layer.dt_softplus);
  const int src = lane < hist ? ring_index_checked(start, lane, R) : R;
  const bool past = lane > hist;
  float d = __shfl_sync(0xffffffffu, d_pos, src);
  d = lane < hist ? d : (past ? 0.f : d_new);
  float xj[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) {
    xj[q] = __shfl_sync(0xffffffffu, x_pos[q], src);
    xj[q] = past ? 0.f : xj[q];
  }
  const float later = later_sum(d, lane);
  const float decay_all = expf(A * __shfl_sync(0xffffffffu, later + d, 0));
  const float weight = d * expf(A * later);

  // S0[p] . C for the warp's rows.
  float dots[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    dots[q] = fmaf(s[q].x, c[0], fmaf(s[q].y, c[1], fmaf(s[q].z, c[2], s[q].w * c[3])));
  Sums::row_sums<RowsCta::kRowsPerWarp>(dots, lane);

  // B_i . C, passed on through shared memory (one barrier).
  __shared__ float bc_s[kWarpRowsMaxEntries];
  {
    cp_async_wait<0>();  // each lane reads back only its own copies before the barrier
    float part[kWarpRowsEntriesPerWarp];
#pragma unroll
    for (int m = 0; m < kWarpRowsEntriesPerWarp; ++m) {
      const int i = warp + kWarps * m;
      part[m] = 0.f;
      if (i <= R) {
        float b[kCols];
        unpack4<Act>(b_s[i][lane], b);
#pragma unroll
        for (int e = 0; e < kCols; ++e) part[m] = fmaf(b[e], c[e], part[m]);
      }
    }
    // Value m ends in lanes 4m .. 4m + 3 (LaneSums' halvings of eight values over 32 lanes).
    Sums::row_sums<kWarpRowsEntriesPerWarp>(part, lane);
    const int i = warp + kWarps * (lane >> 2);
    if ((lane & 3) == 0 && i <= R) bc_s[i] = part[0];
  }
  __syncthreads();
  const float bc_pos = lane <= R ? bc_s[lane] : 0.f;  // lane R: the new token's

  // As in the replay kernel: cursors outside the contract skip the row.
  if (hist < 0 || start < 0 || start >= R || hist + 1 > R) return;
  const int pos_new = ring_index_checked(start, hist, R);
  const float bc = __shfl_sync(0xffffffffu, bc_pos, src);
  const float coef = past ? 0.f : weight * bc;
  float hterm[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) hterm[q] = coef * xj[q];
  Sums::row_sums<RowsCta::kRowsPerWarp>(hterm, lane);

  if (writes_row) {
    const float x_new = to_float(x_own);
    float y = decay_all * dots[0] + (hterm[0] + D * x_new);
    if (z_in != nullptr) y = gate(y, z_own);
    Act* const out = reinterpret_cast<Act*>(p.tok.out) + row * p.tok.out_stride + h * P + p0;
    out[own_row] = from_float<Act>(y);
    // The new ring entry at logical hist: nothing in this launch reads that position.
    reinterpret_cast<Act*>(p.ring_x)[slot * p.ring_x_stride + (static_cast<int64_t>(h) * R + pos_new) * P + p0 + own_row] =
        x_own;
  }
  if (flush != 0) {
    // The fold of the history into the checkpoint (the only state write): S1 = exp(A sum_{j<hist}
    // d_j) S0 + sum_{j<hist} w_j x_j B_j^T, w_j = d_j exp(A sum_{j<i<hist} d_i), the weights of a
    // suffix scan without the new token. The outputs above came from S0 and the whole history, as
    // on rows that do not flush (the same sums as from S1; rounded otherwise than the replay
    // kernel's, which reads them from S1). The state rows are read again (from L2: this CTA read
    // them a few microseconds ago): kept in registers from the first read, they spilled under the
    // bound.
    float4 acc[RowsCta::kRowsPerWarp];
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
      acc[q] = r0 + q < plen ? *reinterpret_cast<const float4*>(S + q * N) : make_float4(0.f, 0.f, 0.f, 0.f);
    const float d_fold = lane < hist ? d : 0.f;
    const float later_fold = later_sum(d_fold, lane);
    const float decay_fold = expf(A * __shfl_sync(0xffffffffu, later_fold + d_fold, 0));
    const float w = d_fold * expf(A * later_fold);
    // Lane j's w_j x_j at the warp's four rows, for every lane to read as one broadcast vector.
    __shared__ float4 wx_s[kWarps][32];
    wx_s[warp][lane] = make_float4(w * xj[0], w * xj[1], w * xj[2], w * xj[3]);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) {
      acc[q].x *= decay_fold, acc[q].y *= decay_fold, acc[q].z *= decay_fold, acc[q].w *= decay_fold;
    }
    int pos = start;
#pragma unroll 4
    for (int j = 0; j < hist; ++j) {
      float bj[kCols];
      unpack4<Act>(b_s[pos][lane], bj);
      const float4 f = wx_s[warp][j];
      pos = pos + 1 == R ? 0 : pos + 1;
      const float fq[RowsCta::kRowsPerWarp] = {f.x, f.y, f.z, f.w};
#pragma unroll
      for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) {
        acc[q].x = fmaf(fq[q], bj[0], acc[q].x), acc[q].y = fmaf(fq[q], bj[1], acc[q].y);
        acc[q].z = fmaf(fq[q], bj[2], acc[q].z), acc[q].w = fmaf(fq[q], bj[3], acc[q].w);
      }
    }
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
      if (r0 + q < plen) __stcs(reinterpret_cast<float4*>(S + q * N), acc[q]);
  }
  if (chunk == 0 && threadIdx.x == 0) ring_dt[pos_new] = d_new;
  // One head per group writes its B, from the token's copy in shared memory (visible since the
  // barrier): read from global memory here, each element's load was waited for before its store,
  // four memory latencies at the kernel's end (session 54's SASS).
  if (chunk == 0 && warp == 0 && h == g * p.geo.heads_per_group) {
    Act* const rb = reinterpret_cast<Act*>(p.ring_B) + slot * p.ring_B_stride + (static_cast<int64_t>(g) * R + pos_new) * N;
    *reinterpret_cast<Raw4<Act>*>(rb + kCols * lane) = b_s[R][lane];
  }
}

}  // namespace replayssm::mamba2
