// mamba2_decode's output-only route on small grids (batch 1-2 of the model geometries): every warp
// forms its own rows' outputs from registers and warp shuffles, so a row that does not flush goes
// from its slot to its outputs through one CTA barrier (the B_j . C sums) and no staging.
//
// At batch 1 a step is a chain of memory latencies, not a stream: the replay kernel's CTA (16 rows
// of one head) stages its ring entries in shared memory after its cursors, then forms the decay
// weights, B_j . C and the per-row terms in passes split by three barriers, each pass waiting for
// its slowest warp. Here the ring's R positions are requested with the cursors, right after the
// slot, each warp holds four rows and the ring's x and delta (one position per lane), and the
// warps split the B_j . C sums, each warp's B loads in flight together. Session 53 (H100, nano
// batch 1, B = 16): non-flush step 5.86 -> 4.89 us, cycle 6.11 -> 5.33; the flush step, which
// runs this prefix and then the replay kernel's code from its start, 8.90 -> 12.05
// (docs/perf-notes.md, Mamba-2 plain decode, "Session 53").
//
// Per row p of the warp (output-only, non-flush; replay_kernel.cuh's header gives the math):
//   y[p] = exp(A sum_j d_j) (S0[p] . C) + sum_j s_j (B_j . C) x_j[p] + D x[p]
// over the entries j <= hist (the ring's history, then the new token), s_j = d_j exp(A sum_{i>j} d_i).
// Lane j holds entry j (d_j, x_j of the warp's rows); lane l holds columns 4l .. 4l + 3 of the state
// rows, C and each B_j. The row sums of the warp's four rows are reduced together
// (LaneSums<32>::row_sums<4>): lane l ends with row l / 8's sum.
//
// Rows that flush (a per-slot flag, read here) go on to the replay kernel's own code (this is the
// first part of its kWarpRows instances), so one launch still serves any mix of phases. Built for an fp32 checkpoint on a 16-byte aligned view,
// dstate 128 (one 16-byte state vector per lane and row), rings of at most 31 entries (one lane
// each) and entries whose rows are 16-byte aligned (B_j loaded in one vector per lane); the
// launcher (replay_warp_rows_choice, launch_impl.cuh) checks all of it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/common/lane_sums.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/rows_cta.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

constexpr int kWarpRowsEntriesPerWarp = 8;  // B_j . C sums per warp: eight reduce together over 32 lanes
constexpr int kWarpRowsMaxEntries = 4 * kWarpRowsEntriesPerWarp;  // the ring's positions and the new token
constexpr int kWarpRowsMaxRing = kWarpRowsMaxEntries - 1;  // one ring position per lane

// One row of an output-only decode launch, run by every thread of the CTA: true where the row is
// done here (it does not flush, or it is padding or its cursors are out of the contract), false
// where it flushes and the caller's code must fold it.
template <typename Act, int kWarps>
__device__ __forceinline__ bool decode_warp_rows(const ReplayParams& p, const int p_chunk) {
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
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return true;

  // The warp's state rows (evict-first: read once per step), and the slot's cursors.
  const float* const S = reinterpret_cast<const float*>(p.state) + slot * p.state_stride +
                         (static_cast<int64_t>(h) * P + p0 + r0) * N + kCols * lane;
  float4 s[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    s[q] = r0 + q < plen ? __ldcs(reinterpret_cast<const float4*>(S + q * N)) : make_float4(0.f, 0.f, 0.f, 0.f);
  const int hist = p.hist[slot];
  const int start = p.start[slot];
  const int8_t flush = p.flush[slot];

  // The ring's R entries by physical position, lane i holding position i, requested beside the
  // cursors rather than after them (they depend on the slot alone): one memory latency fewer
  // before the entries' terms. Once the cursors are in, lane j takes logical entry j's values from
  // the lane of its position. Positions past the history are read too (R <= 31 entries).
  const int R = p.ring_len;
  const Act* const ring_x = reinterpret_cast<const Act*>(p.ring_x) + slot * p.ring_x_stride + static_cast<int64_t>(h) * R * P;
  const Act* const ring_B = reinterpret_cast<const Act*>(p.ring_B) + slot * p.ring_B_stride + static_cast<int64_t>(g) * R * N;
  float* const ring_dt = p.ring_dt + slot * p.ring_dt_stride + static_cast<int64_t>(h) * R;
  float d_pos = 0.f, x_pos[RowsCta::kRowsPerWarp] = {};
  if (lane < R) {
    d_pos = ring_dt[lane];
    const Act* const xr = ring_x + static_cast<int64_t>(lane) * P + p0;
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
      if (r0 + q < plen) x_pos[q] = to_float(xr[r0 + q]);
  }
  float x_tok[RowsCta::kRowsPerWarp] = {};
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    if (r0 + q < plen) x_tok[q] = to_float(x_in[r0 + q]);

  // S0[p] . C for the warp's rows.
  float dots[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    dots[q] = fmaf(s[q].x, c[0], fmaf(s[q].y, c[1], fmaf(s[q].z, c[2], s[q].w * c[3])));
  Sums::row_sums<RowsCta::kRowsPerWarp>(dots, lane);

  // B_i . C for every position i and for the new token (as position R). The warps split the R + 1
  // entries (warp w takes i = w + kWarps m), each warp's eight requested together beside the
  // cursors, and pass the sums on through shared memory (one barrier). Each warp taking all of
  // them in groups of four, a group's loads waited for the previous group's shuffles: ceil((R + 1)
  // / 4) memory latencies in a row (5 at B = 16) where this has one.
  __shared__ float bc_s[kWarpRowsMaxEntries];
  {
    float part[kWarpRowsEntriesPerWarp];
    float b[kWarpRowsEntriesPerWarp][kCols];
#pragma unroll
    for (int m = 0; m < kWarpRowsEntriesPerWarp; ++m) {
      const int i = warp + kWarps * m;
      if (i <= R) load_f32<Act, kCols>((i < R ? ring_B + static_cast<int64_t>(i) * N : B_in) + kCols * lane, b[m]);
    }
#pragma unroll
    for (int m = 0; m < kWarpRowsEntriesPerWarp; ++m) {
      part[m] = 0.f;
      if (warp + kWarps * m <= R) {
#pragma unroll
        for (int e = 0; e < kCols; ++e) part[m] = fmaf(b[m][e], c[e], part[m]);
      }
    }
    // Value m ends in lanes 4m .. 4m + 3 (LaneSums' halvings of eight values over 32 lanes).
    Sums::row_sums<kWarpRowsEntriesPerWarp>(part, lane);
    const int i = warp + kWarps * (lane >> 2);
    if ((lane & 3) == 0 && i <= R) bc_s[i] = part[0];
  }
  __syncthreads();
  const float bc_pos = lane < R ? bc_s[lane] : 0.f;
  const float bc_tok = bc_s[R];

  if (flush != 0) return false;
  // As in the replay kernel: cursors outside the contract skip the row.
  if (hist < 0 || start < 0 || start >= R || hist + 1 > R) return true;
  // Lane j's logical entry (j <= hist: the history, then the new token): its delta, its x at the
  // warp's rows and B_j . C; zeros past it.
  const float d_new = biased_dt_to_delta(to_float(dt_tok) + dt_bias, p.layer.dt_softplus);
  const int pos_new = ring_index_checked(start, hist, R);
  const int src = lane < hist ? ring_index_checked(start, lane, R) : lane;
  float d = __shfl_sync(0xffffffffu, d_pos, src);
  float bc = __shfl_sync(0xffffffffu, bc_pos, src);
  float xj[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) xj[q] = __shfl_sync(0xffffffffu, x_pos[q], src);
  if (lane >= hist) {
    const bool tok = lane == hist;
    d = tok ? d_new : 0.f;
    bc = tok ? bc_tok : 0.f;
#pragma unroll
    for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) xj[q] = tok ? x_tok[q] : 0.f;
  }

  // Decay weights: the sum of the later entries' deltas by a suffix scan over the lanes (lanes past
  // n_ent = hist + 1 hold d = 0), s_j = d_j exp(A later_j); the total decay from lane 0's.
  float later = __shfl_down_sync(0xffffffffu, d, 1);
  if (lane == 31) later = 0.f;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float t = __shfl_down_sync(0xffffffffu, later, off);
    if (lane + off < 32) later += t;
  }
  const float decay_all = expf(A * __shfl_sync(0xffffffffu, later + d, 0));
  const float coef = d * expf(A * later) * bc;
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
  if (chunk == 0 && threadIdx.x == 0) ring_dt[pos_new] = d_new;
  if (chunk == 0 && warp == 0 && h == g * p.geo.heads_per_group) {  // one head per group writes its B
    Act* const rb = reinterpret_cast<Act*>(p.ring_B) + slot * p.ring_B_stride + (static_cast<int64_t>(g) * R + pos_new) * N;
#pragma unroll
    for (int e = 0; e < kCols; ++e) rb[kCols * lane + e] = B_in[kCols * lane + e];
  }
  return true;
}

}  // namespace replayssm::mamba2
