// The Gated DeltaNet row kernel: one template serves the replay decode (flush fused per row), the
// classic state update (the baseline) and the fold on demand.
//
// Work split: a CTA owns (row, v-head, tile of `tile_rows` state rows). The checkpoint S (V x K,
// K contiguous) is streamed with 16-byte accesses along K: a row of S is spread over kLanes = K/16
// consecutive lanes of a warp (16 elements each), so a warp covers 32/kLanes rows per access and
// the dot products over K reduce with log2(kLanes) shuffles. S travels global -> shared memory by
// cp.async in kStages chunk buffers. The per-row vector work (L2 norms, gates, the ring dot
// products k_j.k and k_j.q over <= hist entries, the decay weights) is done once per CTA from the
// ring entries, which are fetched into shared memory ahead of the first chunks of S.
// Flush rows fold the chunk in shared memory, then stream it out: with bf16 activations on the tensor
// cores (fold_chunk_mma; the chunk is then swizzled, kSwizzleRows), otherwise on the CUDA cores
// column by column (fold_chunk_fma).
//
// Decode, per row (docs/contract.md):
//   S_prev = e^G S0 + sum_j e^(G - G_j) u_j k_j^T   (G = sum g_j, G_j inclusive prefix;
//            e^(G - G_j) = exp(sum_{i > j} g_i) is formed from suffix sums)
//   flush rows: S0 <- S_prev (the only state write), history treated as empty;
//   u = beta (v - e^g S_prev k),  y = e^g S_prev q + u (k.q);  append u, k, g at logical hist.
// Non-flush rows never form S_prev: S_prev k = e^G (S0 k) + sum_j e^(G-G_j) (k_j.k) u_j, and the
// same for q, so one pass over S0 feeds both mat-vecs.
#pragma once

#include <cstdint>

#include "replayssm/common/cursor.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/gdn/chunk_ops.cuh"
#include "replayssm/gdn/params.h"

namespace replayssm::gdn {

enum class Mode { kDecode, kStateUpdate, kFold };

// Shared memory, in floats; every section starts on a 16-byte boundary.
struct SmemLayout {
  // [0, ring_k_raw): the cp.async stage buffers of the state stream.
  int ring_k_raw, ring_u_raw, ring_g, weight, coef_k, coef_q, hist_k, hist_q, vin, y, u, scalars, zeros, total;
};

// with_ring: the CTA replays the ring (decode, fold); act_bytes: the ring's element size.
__host__ __device__ inline SmemLayout smem_layout(int ring_len, int tile_rows, int K, int state_bytes,
                                                  int act_bytes, bool with_ring) {
  const int R = with_ring ? ring_len : 0;
  const int T = round4(tile_rows);
  SmemLayout s{};
  int at = kStages * stage_rows(tile_rows, K, state_bytes) * K * state_bytes / 4;
  s.ring_k_raw = at, at += round4(R * K * act_bytes / 4);          // k_j as stored (act)
  s.ring_u_raw = at, at += round4(R * tile_rows * act_bytes / 4);  // u_j[tile rows] as stored (act)
  s.ring_g = at, at += round4(R);                                  // g_j
  s.weight = at, at += round4(R);                                  // e^(G - G_j)
  s.coef_k = at, at += round4(R);                                  // k_j . k
  s.coef_q = at, at += round4(R);                                  // k_j . q
  s.hist_k = at, at += with_ring ? T : 0;
  s.hist_q = at, at += with_ring ? T : 0;
  s.vin = at, at += T;
  s.y = at, at += T;
  s.u = at, at += T;
  s.scalars = at, at += 4;
  s.zeros = at, at += with_ring ? 4 : 0;  // 16 zero bytes: the tensor-core fold's ring rows past n
  s.total = at;
  return s;
}

// ---------------------------------------------------------------------------------------------
template <Mode M, int K, typename ST, typename AT>
__global__ void __launch_bounds__(kThreads, 4) gdn_rows_kernel(const GdnParams p, const int tiles, const int tile_rows) {
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)
  constexpr bool kToken = M != Mode::kFold;           // has a token (q, k, v, a, b, out)
  constexpr bool kRing = M != Mode::kStateUpdate;     // replays the ring
  using Lanes = RowLanes<K, ST>;
  constexpr int kVec = Lanes::kVec;
  constexpr int kLanes = Lanes::kLanes;
  constexpr int kElems = Lanes::kElems;
  constexpr int kChunks = Lanes::kChunks;
  constexpr int kRowsPerWarp = 32 / kLanes;
  constexpr int kGroupsPerCta = kWarps * kRowsPerWarp;
  static_assert(K == 64 || K == 128 || K == 256, "K must be 64, 128 or 256");

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int sub = lane % kLanes;  // lane within its row group
  const int grp = lane / kLanes;  // row group within the warp

  // Grid (tiles, HV, batch) (launch_tiled): no index divisions before the slot read.
  const int tile = blockIdx.x;
  const int hv = blockIdx.y;
  const int row = blockIdx.z;
  // The token's gates (g in fp64: token_log_decay) are computed by this one thread, whose inputs
  // are requested first, beside the slot; the others read e^g and beta from shared memory after
  // the next barrier.
  const bool gate_thread = threadIdx.x == kThreads - 32;  // lane 0 of the last warp (warp 0 does history_weights)
  GateInputs<AT> gate_in{};
  if constexpr (kToken)
    if (gate_thread) load_gate_token(p, row, hv, gate_in), load_gate_head(p, hv, gate_in);
  const int32_t slot = p.slots[row];
  // The k-head, and (decode) whether hv is its first v-head, the CTA that appends k: formed while
  // the slot is on its way and held there by the empty asm. Written at their uses, the k-head's two
  // integer divisions (about twenty-five instructions each) came after the slot's check, ahead of
  // the token's q and k loads that need it, and hv % (HV / H) two more in the tail (sm_90a SASS,
  // session 70; the window kernel's head shifts, docs/perf-notes.md, GDN spec verify "Session 70").
  const int v_per_k = p.HV / p.H;
  int h = hv / v_per_k;
  int k_group_first = hv == h * v_per_k;
  if constexpr (M == Mode::kDecode)
    asm volatile("" : "+r"(h), "+r"(k_group_first));
  else
    asm volatile("" : "+r"(h));
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  const int R = p.ring_len;
  const int V = p.V;

  // This lane's state elements of a row: chunk c, element e -> column kVec * (c * kLanes + sub) + e.
  auto col = [&](int c) { return Lanes::col(c, sub); };

  const int v0 = tile * tile_rows;
  ST* const state_head =
      static_cast<ST*>(p.state) + static_cast<int64_t>(slot) * p.state_slot_stride + static_cast<int64_t>(hv) * V * K;
  extern __shared__ __align__(16) float smem[];
  const int rows_per_stage = stage_rows(tile_rows, K, static_cast<int>(sizeof(ST)));
  // tile_rows and rows_per_stage are powers of two (choose_tiles checks it): a shift, not a
  // division by a run-time divisor.
  const int num_chunks = tile_rows >> (__ffs(rows_per_stage) - 1);
  const int groups_per_stage = rows_per_stage / kRowsPerWarp;
  ST* const stage_base = reinterpret_cast<ST*>(smem);
  const SmemLayout lay = smem_layout(R, tile_rows, K, static_cast<int>(sizeof(ST)), static_cast<int>(sizeof(AT)), kRing);
  AT* const s_ring_k_raw = reinterpret_cast<AT*>(smem + lay.ring_k_raw);
  AT* const s_ring_u_raw = reinterpret_cast<AT*>(smem + lay.ring_u_raw);
  float* const s_ring_g = smem + lay.ring_g;
  float* const s_weight = smem + lay.weight;
  float* const s_coef_k = smem + lay.coef_k;
  float* const s_coef_q = smem + lay.coef_q;
  float* const s_hist_k = smem + lay.hist_k;  // sum_j e^(G-G_j) (k_j.k) u_j[v], per tile row
  float* const s_hist_q = smem + lay.hist_q;
  float* const s_vin = smem + lay.vin;
  float* const s_y = smem + lay.y;
  float* const s_u = smem + lay.u;
  float* const s_scalars = smem + lay.scalars;  // [0] = e^G, [1] = e^g, [2] = beta
  float* const s_zeros = smem + lay.zeros;
  if (kRing && threadIdx.x < 4) s_zeros[threadIdx.x] = 0.f;  // published by the barrier after the ring wait

  // ---- loads, all issued before anything waits: the slot's cursors and flush flag, the token's
  // q, k and the first v element of this thread (registers, as stored), then, once the cursors are
  // known, the ring entries (cp.async group 0) and the first state chunks (groups 1 .. kStages - 1).
  // The ring goes first so the per-row vector work can start as soon as it lands, with the state
  // chunks still in flight (issuing the state first, before the cursor loads, measured slower: the
  // ring then waits behind it). The cursors, the flag and the token's inputs are relaxed loads
  // (load_s32_here): as plain loads ptxas sank q, k and the flag past the cursors' check, so the
  // token's inputs came a memory latency after the cursors, beside the ring's, and the first
  // chunks' copies, whose layout depends on the flag, waited for it (sm_90a SASS, session 56).
  int n = 0, start = 0;
  bool fold = M == Mode::kFold;
  if constexpr (kRing) {
    n = load_s32_here(p.hist + slot);
    start = load_s32_here(p.start + slot);
    if constexpr (M == Mode::kDecode) fold = load_s8_here(p.flush + slot) != 0;
  }
  RawVec<AT, kVec> q_raw[kChunks], k_raw[kChunks];
  AT v_first{};
  if constexpr (kToken) {
    const AT* qrow = static_cast<const AT*>(p.q) + row * p.q_row_stride + static_cast<int64_t>(h) * K;
    const AT* krow = static_cast<const AT*>(p.k) + row * p.k_row_stride + static_cast<int64_t>(h) * K;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) q_raw[c].load_here(qrow + col(c)), k_raw[c].load_here(krow + col(c));
    if (static_cast<int>(threadIdx.x) < tile_rows)
      v_first = load_elem_here(static_cast<const AT*>(p.v) + row * p.v_row_stride + static_cast<int64_t>(hv) * V + v0 +
                               threadIdx.x);
  }
  if constexpr (kRing) {
    // Commit keeps hist <= B <= R - T and start in [0, R); a row whose cursors break that (which
    // only memory corruption produces) writes nothing rather than addressing outside the ring.
    const int max_hist = M == Mode::kDecode ? R - 1 : R;
    if (n < 0 || n > max_hist || start < 0 || start >= R) return;
    // Folding an empty history rewrites S0 unchanged: skip it (and the whole row for a fold).
    if (n == 0) {
      if constexpr (M == Mode::kFold) return;
      fold = false;
    }
  }

  if constexpr (kRing) {
    const AT* ring_k = static_cast<const AT*>(p.ring_k) + static_cast<int64_t>(slot) * p.ring_k_slot_stride +
                       static_cast<int64_t>(h) * R * K;
    const AT* ring_u = static_cast<const AT*>(p.ring_u) + static_cast<int64_t>(slot) * p.ring_u_slot_stride +
                       static_cast<int64_t>(hv) * R * V + v0;
    const float* ring_g = p.ring_g + static_cast<int64_t>(slot) * p.ring_g_slot_stride + static_cast<int64_t>(hv) * R;
    constexpr int kPer16 = 16 / static_cast<int>(sizeof(AT));
    const int k_pieces = K / kPer16, u_pieces = tile_rows / kPer16, u_shift = __ffs(u_pieces) - 1;
    for (int i = threadIdx.x; i < n * k_pieces; i += kThreads) {
      const int j = i / k_pieces, c = i % k_pieces;
      cp_async16(s_ring_k_raw + j * K + c * kPer16, ring_k + static_cast<int64_t>(ring_index_checked(start, j, R)) * K + c * kPer16);
    }
    for (int i = threadIdx.x; i < n * u_pieces; i += kThreads) {
      const int j = i >> u_shift, c = i & (u_pieces - 1);
      cp_async16(s_ring_u_raw + j * tile_rows + c * kPer16,
                 ring_u + static_cast<int64_t>(ring_index_checked(start, j, R)) * V + c * kPer16);
    }
    for (int j = threadIdx.x; j < n; j += kThreads) cp_async4(s_ring_g + j, ring_g + ring_index_checked(start, j, R));
  }
  // The stage buffers' swizzle mask (kSwizzleRows): swizzled for a tensor-core fold only.
  const int swz = kRing && kMmaFold<AT> && fold ? kSwizzleRows - 1 : 0;
  // Chunk c of the tile (rows v0 + c * rows_per_stage ..) into buffer c % kStages; every thread
  // commits a group, empty or not, so the group counts stay uniform.
  auto issue_chunk = [&](int c) {
    if (c < num_chunks) {
      constexpr int kPer16 = 16 / static_cast<int>(sizeof(ST));
      constexpr int kRowPieces = K / kPer16;
      const int pieces = rows_per_stage * kRowPieces;
      const ST* src = state_head + static_cast<int64_t>(v0 + c * rows_per_stage) * K;
      ST* dst = stage_base + (c % kStages) * rows_per_stage * K;
      // A row has >= 8 pieces, so the key (row & swz < 8) changes only the piece within the row.
      for (int i = threadIdx.x; i < pieces; i += kThreads)
        cp_async16(dst + (i ^ ((i / kRowPieces) & swz)) * kPer16, src + i * kPer16);
    }
    cp_async_commit();
  };
  cp_async_commit();
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) issue_chunk(c);
  float kh[kElems], qh[kElems];
  if constexpr (kToken) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) q_raw[c].to_f32(&qh[c * kVec]), k_raw[c].to_f32(&kh[c * kVec]);
    const AT* vrow = static_cast<const AT*>(p.v) + row * p.v_row_stride + static_cast<int64_t>(hv) * V + v0;
    if (static_cast<int>(threadIdx.x) < tile_rows) s_vin[threadIdx.x] = Elem<AT>::to_f32(v_first);
    for (int vl = threadIdx.x + kThreads; vl < tile_rows; vl += kThreads) s_vin[vl] = Elem<AT>::to_f32(vrow[vl]);
  }

  // ---- per-token vectors: this lane's 16 elements of k and q (every row group holds all of K).
  float g = 0.f, eg = 1.f, beta = 0.f, kq = 0.f;
  if constexpr (kToken) {
    float qscale = p.scale, kscale = 1.f;
    if (p.qk_l2norm) {
      float sq = 0.f, sk = 0.f;
#pragma unroll
      for (int e = 0; e < kElems; ++e) sq += qh[e] * qh[e], sk += kh[e] * kh[e];
      sq = group_sum<kLanes>(sq);
      sk = group_sum<kLanes>(sk);
      qscale /= sqrtf(sq + 1e-6f);
      kscale = 1.f / sqrtf(sk + 1e-6f);
    }
#pragma unroll
    for (int e = 0; e < kElems; ++e) qh[e] *= qscale, kh[e] *= kscale;
#pragma unroll
    for (int e = 0; e < kElems; ++e) kq += kh[e] * qh[e];
    kq = group_sum<kLanes>(kq);
    if (gate_thread) {
      g = token_log_decay(gate_in);
      s_scalars[1] = expf(g);
      s_scalars[2] = token_beta(gate_in);
    }
    if constexpr (!kRing) {  // the ring's barrier publishes them otherwise
      __syncthreads();
      eg = s_scalars[1];
      beta = s_scalars[2];
    }
  }

  // ---- the ring: k_j dot products (one row group per entry) and the decay weights.
  float eG = 1.f;
  if constexpr (kRing) {
    cp_async_wait<kStages - 1>();  // group 0: the ring entries
    __syncthreads();
    if (warp == 0) history_weights(n, lane, s_ring_g, s_weight, &s_scalars[0]);
    // The ring dot products (non-flush decode rows); warp-uniform trip count, as the group sums
    // need every lane of the warp.
    if constexpr (kToken) {
      if (!fold) {
        for (int jb = warp * kRowsPerWarp; jb < n; jb += kGroupsPerCta) {
          const int j = jb + grp;
          const bool live = j < n;
          float kj[kElems];
          load_ring_k_cols<K, ST>(s_ring_k_raw + j * K, live, sub, kj);
          float dk = 0.f, dq = 0.f;
#pragma unroll
          for (int e = 0; e < kElems; ++e) dk += kj[e] * kh[e], dq += kj[e] * qh[e];
          dk = group_sum<kLanes>(dk);
          dq = group_sum<kLanes>(dq);
          if (sub == 0 && live) s_coef_k[j] = dk, s_coef_q[j] = dq;
        }
      }
    }
    __syncthreads();
    eG = s_scalars[0];
    if constexpr (kToken) eg = s_scalars[1], beta = s_scalars[2];

    // Per tile row: the history terms (non-flush decode rows); the state stream's first barrier
    // publishes them.
    if constexpr (kToken) {
      if (!fold) {
        for (int vl = threadIdx.x; vl < tile_rows; vl += kThreads) {
          float hk = 0.f, hq = 0.f;
          for (int j = 0; j < n; ++j) {
            const float wu = s_weight[j] * Elem<AT>::to_f32(s_ring_u_raw[j * tile_rows + vl]);
            hk += s_coef_k[j] * wu;
            hq += s_coef_q[j] * wu;
          }
          s_hist_k[vl] = hk;
          s_hist_q[vl] = hq;
        }
      }
    }
  }

  // ---- the state stream: chunk c waits for its cp.async group, the barrier publishes it (and
  // frees the buffer of chunk c - 1, which chunk c + kStages - 1 then refills).
  // Fold CTAs and the others run separate copies of the loop (`folding` is a constant in each):
  // with the tensor-core fold in the shared loop, the non-flush step's stream measured 4 % slower
  // (158 vs 152 µs, Qwen3.5-4B, batch 256).
  auto stream = [&](const bool folding) {
    const int key_mask = folding ? swz : 0;
    for (int chunk = 0; chunk < num_chunks; ++chunk) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      issue_chunk(chunk + kStages - 1);
      ST* const buf = stage_base + (chunk % kStages) * rows_per_stage * K;
      if (folding) {
        // S_prev = e^G S0 + sum_j (e^(G-G_j) u_j) k_j^T on the chunk, in shared memory.
        fold_chunk<K, ST, AT>(buf, chunk * rows_per_stage, rows_per_stage, tile_rows, eG, n, s_weight, s_ring_k_raw,
                              s_ring_u_raw, s_zeros);
        __syncthreads();  // the row groups below read other threads' columns
      }
      for (int g = warp; g < groups_per_stage; g += kWarps) {  // warp-uniform
        const int rr = g * kRowsPerWarp + grp;  // row within the chunk
        const int vl = chunk * rows_per_stage + rr;  // row within the tile
        float s[kElems];
        load_state_row<K, ST>(buf + rr * K, sub, rr & key_mask, s);
        ST* const row_ptr = state_head + static_cast<int64_t>(v0 + vl) * K;

        if (folding) {
          // The folded chunk is the new checkpoint (the only state write of a decode step).
#pragma unroll
          for (int c = 0; c < kChunks; ++c) store_state16(row_ptr + col(c), &s[c * kVec]);
        }

        if constexpr (kToken) {
          float dk = 0.f, dq = 0.f;
#pragma unroll
          for (int e = 0; e < kElems; ++e) dk += s[e] * kh[e], dq += s[e] * qh[e];
          dk = group_sum<kLanes>(dk);
          dq = group_sum<kLanes>(dq);
          float sk = dk, sq = dq;  // S_prev k and S_prev q
          if constexpr (M == Mode::kDecode) {
            if (!folding) sk = eG * dk + s_hist_k[vl], sq = eG * dq + s_hist_q[vl];
          }
          const float uu = beta * (s_vin[vl] - eg * sk);
          const float y = eg * sq + uu * kq;
          if (sub == 0) s_y[vl] = y, s_u[vl] = uu;
          if constexpr (M == Mode::kStateUpdate) {
            // S <- e^g S + u k^T  (= e^g S (I - beta k k^T) + beta v k^T).
#pragma unroll
            for (int e = 0; e < kElems; ++e) s[e] = eg * s[e] + uu * kh[e];
            // Plain stores: with the .cs hint this instance took 85 registers instead of 80 (5
            // CTAs per SM instead of 6) and ran 0.9 % slower (H200, Qwen3.5-4B, batch 256).
#pragma unroll
            for (int c = 0; c < kChunks; ++c) store_state16<false>(row_ptr + col(c), &s[c * kVec]);
          }
        }
      }
    }
  };
  if (fold) {
    stream(true);
  } else {
    stream(false);
  }
  cp_async_wait<0>();

  // ---- outputs and ring appends.
  if constexpr (kToken) {
    __syncthreads();
    AT* out = static_cast<AT*>(p.out) + row * p.out_row_stride + static_cast<int64_t>(hv) * V + v0;
    AT* ring_u = nullptr;
    int p_new = 0;  // the new entry's physical position (decode only: state_update has no ring)
    if constexpr (M == Mode::kDecode) {
      p_new = ring_index_checked(start, n, R);
      ring_u = static_cast<AT*>(p.ring_u) + static_cast<int64_t>(slot) * p.ring_u_slot_stride +
               (static_cast<int64_t>(hv) * R + p_new) * V + v0;
    }
    for (int vl = threadIdx.x; vl < tile_rows; vl += kThreads) {
      out[vl] = Elem<AT>::from_f32(s_y[vl]);
      if constexpr (M == Mode::kDecode) ring_u[vl] = Elem<AT>::from_f32(s_u[vl]);
    }
    if constexpr (M == Mode::kDecode) {
      if (tile == 0) {
        if (gate_thread)
          p.ring_g[static_cast<int64_t>(slot) * p.ring_g_slot_stride + static_cast<int64_t>(hv) * R + p_new] = g;
        // k is shared by the v-heads of a k-group: the group's first v-head appends it.
        if (k_group_first && warp == 0 && grp == 0) {
          AT* rk = static_cast<AT*>(p.ring_k) + static_cast<int64_t>(slot) * p.ring_k_slot_stride +
                   (static_cast<int64_t>(h) * R + p_new) * K;
#pragma unroll
          for (int c = 0; c < kChunks; ++c) store_from_f32<AT, kVec>(rk + col(c), &kh[c * kVec]);
        }
      }
    }
  }
}

}  // namespace replayssm::gdn
