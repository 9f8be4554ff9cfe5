// The classic Mamba-2 step (mamba2_state_update, the baseline): S <- exp(A d) S + d x B^T,
// y = S C + D x, y *= silu(z), one read and one write of the state per token.
//
// One CTA = one (row, head, chunk of P), the same streaming layout as the replay kernel
// (RowLayout). The plain form has one token per row and writes the state back in place; the
// varlen (spec baseline) form runs the row's n tokens over the state held in registers and writes
// the state after token i to snapshot_slots[r, i] (a padding id there: no snapshot).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Shared memory in floats: B_i and C_i (fp32) [T][N] each, x_i [p_chunk][odd(T)], the decay and
// delta per token [T] each, the row dot products [T][p_chunk]; then the target slots [T] (int32).
struct StateUpdateSmem {
  int b, c, x, ldx, decay, delta, dot, target, total;
  __host__ __device__ StateUpdateSmem(int T, int p_chunk, int N) {
    ldx = odd_stride(T);
    b = 0;
    c = b + T * N;
    x = c + T * N;
    decay = x + p_chunk * ldx;
    delta = decay + T;
    dot = delta + T;
    target = dot + T * p_chunk;
    total = target + T;
  }
};

template <typename Act, typename St, int N, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) mamba2_state_update_kernel(const StateUpdateParams p, const int p_chunk) {
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)
  using L = RowLayout<St, N>;
  using V = StateVec<St>;
  constexpr int kThreads = kWarps * 32;
  constexpr int U = L::kRowsPerThread;
  constexpr int KV = L::kVecsPerLane;
  constexpr int VE = L::kVecElems;
  constexpr int kRowsPerIter = kWarps * L::kRowsPerWarp * U;

  extern __shared__ __align__(16) float smem[];

  // Grid (P chunks, H, batch), as the replay kernel's.
  const int P = p.geo.P;
  const int chunk = blockIdx.x;
  const int h = blockIdx.y;
  const int row = blockIdx.z;
  const int g = h / p.geo.heads_per_group;
  const int p0 = chunk * p_chunk;
  const int plen = min(p_chunk, P - p0);

  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int lr = lane % L::kLanesPerRow;
  const int rw = lane / L::kLanesPerRow;

  const int64_t head_off = (static_cast<int64_t>(h) * P + p0) * N;
  St* const S = reinterpret_cast<St*>(p.state) + slot * p.state_stride + head_off;
  auto row_of = [&](int it, int u) { return it * kRowsPerIter + (u * kWarps + warp) * L::kRowsPerWarp + rw; };
  auto load_rows = [&](int it, uint4 (&raw)[U][KV]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int pl = row_of(it, u);
#pragma unroll
      for (int k = 0; k < KV; ++k)
        raw[u][k] = pl < plen ? load_state_vec(S + static_cast<int64_t>(pl) * N + L::n_of(lr, k, 0), p.state_vec_aligned) : make_uint4(0, 0, 0, 0);
    }
  };
  uint4 raw[U][KV];
  load_rows(0, raw);

  const bool varlen = p.cu_seqlens != nullptr;
  const int tok0 = varlen ? p.cu_seqlens[row] : row;
  const int n_tok = varlen ? p.cu_seqlens[row + 1] - tok0 : 1;
  if (n_tok < 1 || n_tok > p.max_tokens) return;  // outside the contract: skipped (no host sync)

  const int T = p.max_tokens;
  const StateUpdateSmem lay(T, p_chunk, N);
  float* const b_s = smem + lay.b;
  float* const c_s = smem + lay.c;
  float* const x_s = smem + lay.x;
  float* const decay_s = smem + lay.decay;
  float* const delta_s = smem + lay.delta;
  float* const dot_s = smem + lay.dot;
  int32_t* const target_s = reinterpret_cast<int32_t*>(smem + lay.target);
  const int ldx = lay.ldx;
  const float A = p.layer.A[h];

  const Act* const x_in = reinterpret_cast<const Act*>(p.tok.x);
  const Act* const B_in = reinterpret_cast<const Act*>(p.tok.B);
  const Act* const C_in = reinterpret_cast<const Act*>(p.tok.C);
  const Act* const dt_in = reinterpret_cast<const Act*>(p.tok.dt);
  for (int i = tid; i < n_tok; i += kThreads) {
    const float d = make_delta(to_float(dt_in[(tok0 + i) * p.tok.dt_stride + h]), p.layer.dt_bias, h, p.layer.dt_softplus);
    delta_s[i] = d;
    decay_s[i] = expf(A * d);
    target_s[i] = varlen ? p.snapshot_slots[row * p.snapshot_stride + i] : slot;
  }
  for (int e = tid; e < n_tok * N; e += kThreads) {
    const int i = e / N, n = e % N;
    const int64_t off = (tok0 + i) * p.tok.B_stride + g * N + n;
    b_s[e] = to_float(B_in[off]);
    c_s[e] = to_float(C_in[(tok0 + i) * p.tok.C_stride + g * N + n]);
  }
  for (int e = tid; e < n_tok * plen; e += kThreads) {
    const int i = e / plen, pl = e - i * plen;
    x_s[pl * ldx + i] = to_float(x_in[(tok0 + i) * p.tok.x_stride + h * P + p0 + pl]);
  }
  __syncthreads();

  const int iters = (plen + kRowsPerIter - 1) / kRowsPerIter;
  for (int it = 0; it < iters; ++it) {
    uint4 next[U][KV];
    if (it + 1 < iters) load_rows(it + 1, next);

    float acc[U][KV][VE];
    int xrow[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      xrow[u] = min(row_of(it, u), plen - 1) * ldx;
#pragma unroll
      for (int k = 0; k < KV; ++k) V::unpack(raw[u][k], acc[u][k]);
    }

    for (int i = 0; i < n_tok; ++i) {
      const float decay = decay_s[i], d = delta_s[i];
      float bi[KV][VE], ci[KV][VE];
#pragma unroll
      for (int k = 0; k < KV; ++k) {
        const float4* bp = reinterpret_cast<const float4*>(b_s + i * N + L::n_of(lr, k, 0));
        const float4* cp = reinterpret_cast<const float4*>(c_s + i * N + L::n_of(lr, k, 0));
#pragma unroll
        for (int q = 0; q < VE / 4; ++q) {
          const float4 vb = bp[q], vc = cp[q];
          bi[k][4 * q + 0] = vb.x, bi[k][4 * q + 1] = vb.y, bi[k][4 * q + 2] = vb.z, bi[k][4 * q + 3] = vb.w;
          ci[k][4 * q + 0] = vc.x, ci[k][4 * q + 1] = vc.y, ci[k][4 * q + 2] = vc.z, ci[k][4 * q + 3] = vc.w;
        }
      }
      const int32_t target = target_s[i];
      const bool store = slot_is_live(target, p.null_slot, p.num_slots);
      St* const St_out = reinterpret_cast<St*>(p.state) + target * p.state_stride + head_off;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float dx = d * x_s[xrow[u] + i];
        float part = 0.f;
#pragma unroll
        for (int k = 0; k < KV; ++k) {
#pragma unroll
          for (int e = 0; e < VE; ++e) {
            acc[u][k][e] = fmaf(decay, acc[u][k][e], dx * bi[k][e]);
            part = fmaf(acc[u][k][e], ci[k][e], part);
          }
        }
        const int pl = row_of(it, u);
        if (store && pl < plen) {
#pragma unroll
          for (int k = 0; k < KV; ++k)
            store_state_vec(St_out + static_cast<int64_t>(pl) * N + L::n_of(lr, k, 0), V::pack(acc[u][k]), p.state_vec_aligned);
        }
        part = L::row_sum(part);
        if (lr == 0 && pl < plen) dot_s[i * p_chunk + pl] = part;
      }
    }

#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < KV; ++k) raw[u][k] = next[u][k];
  }
  __syncthreads();

  // y = S C + D x, gated; outputs of the row's tokens.
  const float D = p.layer.D != nullptr ? p.layer.D[h] : 0.f;
  const Act* const z_in = reinterpret_cast<const Act*>(p.tok.z);
  Act* const out = reinterpret_cast<Act*>(p.tok.out);
  for (int e = tid; e < n_tok * plen; e += kThreads) {
    const int i = e / plen, pl = e - i * plen;
    float y = dot_s[i * p_chunk + pl] + D * x_s[pl * ldx + i];
    if (z_in != nullptr) y = gate(y, to_float(z_in[(tok0 + i) * p.tok.z_stride + h * P + p0 + pl]));
    out[(tok0 + i) * p.tok.out_stride + h * P + p0 + pl] = from_float<Act>(y);
  }
}

}  // namespace replayssm::mamba2
