// The classic Mamba-2 step (mamba2_state_update, plain form) on small grids (batch 1-2 of the model
// geometries): every warp updates four state rows in registers and reduces their outputs by warp
// shuffles, so a CTA goes from its slot to its stores with no shared memory and no barrier.
//
// At batch 1 the step is a chain of latencies, not a stream: the general kernel
// (state_update_kernel.cuh) stages B, C and x in shared memory, waits for its slowest warp at two
// barriers and runs its row loop over shared-memory operands (4.35 us of kernel body against
// ~5.5 us per launch, session 25's trace). Here each lane holds 4 of a row's 128 state columns and
// the matching B and C values; the warp's four rows go through the same decay and rank-1 update
// as the general kernel's (S <- exp(A d) S + d x B^T, y = S . C + D x, y *= silu(z)), in the same
// order per element, and LaneSums<32>::row_sums<4> reduces the four rows' products at once (lane l
// ends with row l / 8's sum). Built for an fp32 state on a 16-byte aligned view and dstate 128;
// the launcher (update_rows_choice, launch_impl.cuh) checks that and the chunk size.
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

template <typename Act, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) mamba2_state_update_rows_kernel(const StateUpdateParams p, const int p_chunk) {
  constexpr int N = RowsCta::kN;
  constexpr int kCols = RowsCta::kCols;
  using Sums = LaneSums<32>;
  const auto [chunk, h, row, g, p0, plen, warp, lane, r0, own_row] = RowsCta(p.geo, p_chunk);
  const int P = p.geo.P;
  const Act* const x_in = reinterpret_cast<const Act*>(p.tok.x) + row * p.tok.x_stride + h * P + p0;
  const Act* const B_in = reinterpret_cast<const Act*>(p.tok.B) + row * p.tok.B_stride + g * N + kCols * lane;
  const Act* const C_in = reinterpret_cast<const Act*>(p.tok.C) + row * p.tok.C_stride + g * N + kCols * lane;
  const Act* const dt_in = reinterpret_cast<const Act*>(p.tok.dt) + row * p.tok.dt_stride + h;
  hold_before_wait(x_in, B_in, C_in, dt_in, p0, plen, own_row);
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)

  // The slot, then the token's inputs: none of them waits for another.
  const int32_t slot = p.slots[row];
  const Act dt_tok = *dt_in;
  const float dt_bias = p.layer.dt_bias != nullptr ? p.layer.dt_bias[h] : 0.f;
  const float A = p.layer.A[h];
  const float D = p.layer.D != nullptr ? p.layer.D[h] : 0.f;
  float b[kCols], c[kCols];
#pragma unroll
  for (int e = 0; e < kCols; ++e) b[e] = to_float(B_in[e]), c[e] = to_float(C_in[e]);
  float x[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) x[q] = r0 + q < plen ? to_float(x_in[r0 + q]) : 0.f;
  const float x_own = own_row < plen ? to_float(x_in[own_row]) : 0.f;
  const Act* const z_in = p.tok.z != nullptr ? reinterpret_cast<const Act*>(p.tok.z) + row * p.tok.z_stride + h * P + p0 : nullptr;
  const float z_own = z_in != nullptr && own_row < plen ? to_float(z_in[own_row]) : 0.f;
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;

  // The warp's state rows (evict-first: read once per step).
  float* const S = reinterpret_cast<float*>(p.state) + slot * p.state_stride + (static_cast<int64_t>(h) * P + p0 + r0) * N +
                   kCols * lane;
  float4 s[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q)
    s[q] = r0 + q < plen ? __ldcs(reinterpret_cast<const float4*>(S + q * N)) : make_float4(0.f, 0.f, 0.f, 0.f);

  const float d = biased_dt_to_delta(to_float(dt_tok) + dt_bias, p.layer.dt_softplus);
  const float decay = expf(A * d);
  float part[RowsCta::kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < RowsCta::kRowsPerWarp; ++q) {
    const float dx = d * x[q];
    float v[kCols] = {s[q].x, s[q].y, s[q].z, s[q].w};
    part[q] = 0.f;
#pragma unroll
    for (int e = 0; e < kCols; ++e) {
      v[e] = fmaf(decay, v[e], dx * b[e]);
      part[q] = fmaf(v[e], c[e], part[q]);
    }
    if (r0 + q < plen) *reinterpret_cast<float4*>(S + q * N) = make_float4(v[0], v[1], v[2], v[3]);
  }
  Sums::row_sums<RowsCta::kRowsPerWarp>(part, lane);
  if ((lane & 7) == 0 && own_row < plen) {
    float y = part[0] + D * x_own;
    if (z_in != nullptr) y = gate(y, z_own);
    Act* const out = reinterpret_cast<Act*>(p.tok.out) + row * p.tok.out_stride + h * P + p0;
    out[own_row] = from_float<Act>(y);
  }
}

}  // namespace replayssm::mamba2
