// The Gated DeltaNet window kernel: rows of 1 <= n <= T packed tokens (cu_seqlens). One template
// serves the speculative verify (replay form) and the varlen snapshot form of the classic state
// update (the spec baseline).
//
// Work split and state stream as in rows_kernel.cuh: a CTA owns (row, v-head, tile of tile_rows
// state rows), S streams global -> shared by cp.async in kWindowStages chunk buffers, a state row is
// spread over kLanes = K/16 lanes (16 elements each). The window's q̂_i and k̂_i (fp32, L2
// normalised) and v_i[tile rows] sit in shared memory, so every row group can take the dot
// products of its state row with all of them. The spec verify is instantiated per window tile kT
// (spec_window_tile): a state row's 2 kT products are one unrolled pass reduced together.
//
// Spec verify, per row (docs/contract.md; G_i the window-local inclusive cumsum of g):
//   S_base = e^Gh S0 + sum_j e^(Gh - Gh_j) u_j k_j^T over the history (flush rows: S0 <- S_base,
//            the only state write, and the history is then empty);
//   (I + A) U = R,  A[i,j] = beta_i e^(G_i - G_j) k̂_i.k̂_j (i > j),
//                   R[i]   = beta_i (v_i - e^G_i S_base k̂_i);
//   y_i = e^G_i S_base q̂_i + sum_{j<=i} e^(G_i - G_j) (k̂_j.q̂_i) u_j;
//   u_i, k̂_i, g_i appended to the ring at logical hist + i.
// S_base k̂_i and S_base q̂_i for all i come from one pass over S0: non-flush rows add the history
// terms e^Gh (S0 k̂_i) + sum_j e^(Gh-Gh_j) (k_j.k̂_i) u_j (never forming S_base); flush rows fold
// the chunk in shared memory first. The solve is forward substitution over <= kMaxSpecTokens
// rows, per state row, in registers: no sequential state loop.
//
// Snapshot state update, per row: S = state[slots[r]] in registers; for each token i
// S <- e^g_i S, u = beta_i (v_i - S k̂_i), S += u k̂_i, y_i = S q̂_i, and the state after token i is
// written to state[snapshot_slots[r, i]] (a padding id there: no write).
#pragma once

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/common/lane_sums.cuh"
#include "replayssm/common/smem_rows.cuh"
#include "replayssm/gdn/chunk_ops.cuh"
#include "replayssm/gdn/rows_kernel.cuh"
#include "replayssm/gdn/window_mma.cuh"
#include "replayssm/gdn/window_stream.cuh"

namespace replayssm::gdn {

enum class WindowMode { kSpecVerify, kSnapshotUpdate };

// The most tokens a spec-verify row may hold: the solve keeps one u_i per token in registers.
constexpr int kMaxSpecTokens = 8;

// State-stream buffers of the window kernel: one fewer than the rows kernel's kStages. With the
// window's per-token sections its shared memory held it to 3 CTAs per SM (ncu, Qwen3.5-4B, T = 4:
// 64.7 KB per CTA, 12 warps per SM, 20 % of DRAM bandwidth on a non-flush step); 3 buffers of
// 8 KB and no fp32 fold coefficients fit 4.
constexpr int kWindowStages = 3;
// A v-head pair at T = 4 streams through 2 buffers: with its per-head sections (about 12 KB more
// than one head's at K = 128) and 3 buffers it fits 3 CTAs per SM instead of 4, where the pair
// measured no gain over one head (H200, Qwen3.5-4B, batch 256: 294.4 vs 296.6 us); with 2 it fits
// 4, and 4 CTAs still keep 8 buffers of 8 KB per SM in flight: 294.1 vs 277.3 us in one run.
// A 2-byte state on the tensor cores at K <= 128 also streams through 2 at T = 8: its 8 KB stage
// holds twice an fp32 stage's rows, so the partial products of a chunk (window_smem's `part`) take
// twice the space, and with 3 buffers one CTA per SM fewer fit than with an fp32 state (K = 128,
// B = 16, one head: 75.1 KB, 2 CTAs per SM; with 2 buffers 67.1 KB, 3). At T = 4 one head fits 4
// either way (53.2 KB).
template <int kHeads, int kT, int K, typename ST, bool kTensorCores>
constexpr int window_stages() {
  if (kHeads == 2 && kT == 4) return 2;
  if (kTensorCores && sizeof(ST) == 2 && kT == 8 && K <= 128) return 2;
  return kWindowStages;
}

// Shared memory of the window kernel, in floats; every section starts on a 16-byte boundary.
// T sizes the per-token sections: the window tile kT for the spec verify, max_tokens for the snapshot form.
struct WindowSmem {
  // [0, ring_k_raw): the cp.async stage buffers of the state stream.
  int ring_k_raw, ring_u_raw, ring_g, weight, coef_k, coef_q, win_k, win_q, win_v, sk, sq, tok, pair, scalars,
      target, zeros, part, win_split, total;
};

// Whether a window-kernel instance takes its window products and its fold on tensor cores: the
// spec verify with bf16 activations, window tiles of 4 and 8 tokens for an fp32 checkpoint and of 2
// to 8 for a bf16 one (window_mma.cuh, fold_chunk_mma). The products feed only act-dtype outputs
// and ring entries, which the split-bf16 products serve at bf16; the fold needs the exact bf16 ring
// operands. Measured in one run for an fp32 checkpoint (session 5, 3xTF32 products; Qwen3.5-4B,
// batch 256, B = 16, all accepted; µs per verify step, CUDA cores -> tensor cores): T = 1 181.3 ->
// 234.6, T = 2 267.0 -> 282.2, T = 4 378.4 -> 332.4, T = 8 796.3 -> 565.6. With 2 or 4 products per
// state row the CUDA cores are cheaper than the operand splits and the partial-sum exchange; the
// tensor-core cost barely grows with T. Other instances keep the CUDA-core path.
//
// A bf16 checkpoint takes the same path (WindowMmaBf16: the state rows are exact bf16 operands, so
// only the window vectors are split; fold_chunk_mma folds a bf16 chunk as it does for the row
// kernel). On the CUDA cores it ran no faster than the per-draft snapshot baseline, whose bytes
// halve with the state's. Qwen3.5-4B, batch 256, one run per pair (µs, CUDA cores -> tensor cores):
// T = 2 269.4 -> 169.5 (session 10), T = 4 431.6 -> 251.8, T = 8 881.0 -> 629.6 (session 9).
template <WindowMode WM, int kT, typename ST, typename AT>
constexpr bool kWindowTensorCores = WM == WindowMode::kSpecVerify && std::is_same_v<AT, __nv_bfloat16> &&
                                    ((std::is_same_v<ST, float> && kT >= 4) ||
                                     (std::is_same_v<ST, __nv_bfloat16> && kT >= 2));

// Whether an instance that takes its window products on the CUDA cores folds on tensor cores
// (fold_chunk_mma, from a swizzled chunk, as the kWindowTensorCores instances fold): the 2-token
// tile of an fp32 checkpoint with bf16 activations. Its two products per state row stay cheaper on
// the CUDA cores, but its CUDA-core fold made its flush step the slowest of any window tile, and
// slower than the per-draft snapshots'. H200, B = 16, all accepted, three processes per build
// (session 42), CUDA-core -> tensor-core fold: Qwen3.5-4B batch 256 flush step 462.7 -> 396.3 us,
// cycle 223.0 -> 213.1; Qwen3.5-122B 895.9 -> 760.0 and 426.1 -> 407.9; batch 1 cycle +0.7 / +2.1 %
// (the non-flush steps share the loop and its registers). At T = 1 the tensor-core fold in this
// loop measured slower (199 vs 182 us, Qwen3.5-4B, batch 256): not taken there.
template <WindowMode WM, int kT, typename ST, typename AT>
constexpr bool kWindowMmaFoldOnly = WM == WindowMode::kSpecVerify && std::is_same_v<AT, __nv_bfloat16> &&
                                    std::is_same_v<ST, float> && kT == 2;

// heads: v-heads per CTA (1, or 2 of one k-head with whole V: kHeads of gdn_window_kernel). The
// sections marked "per head" repeat for each; "rows" is heads * tile_rows, the CTA's state rows.
// mma_fold_only: kWindowMmaFoldOnly (the zero block of the tensor-core fold, without the partial sums).
__host__ __device__ inline WindowSmem window_smem(bool spec, bool tensor_cores, int ring_len, int T, int tile_rows,
                                                  int K, int state_bytes, int act_bytes, int heads = 1,
                                                  int stages = kWindowStages, bool reg_stream = false,
                                                  bool mma_fold_only = false) {
  const int R = spec ? ring_len : 0;
  const int TT = round4(T * T);
  const int rows = heads * tile_rows;
  WindowSmem s{};
  // The register stream (window_stream.cuh) has no stage buffers and no partial sums.
  int at = reg_stream ? 0 : stages * stage_rows(tile_rows, K, state_bytes) * K * state_bytes / 4;
  s.ring_k_raw = at, at += round4(R * K * act_bytes / 4);          // history k_j as stored (act)
  s.ring_u_raw = at, at += round4(R * rows * act_bytes / 4);       // per head: history u_j[tile rows] (act)
  s.ring_g = at, at += heads * round4(R);                          // per head: history g_j
  s.weight = at, at += heads * round4(R);                          // per head: e^(Gh - Gh_j)
  s.coef_k = at, at += round4(R * T);                              // [j][i] k_j . k̂_i
  s.coef_q = at, at += round4(R * T);                              // [j][i] k_j . q̂_i
  s.win_k = at, at += T * K;                                       // [i][K] k̂_i (fp32)
  s.win_q = at, at += T * K;                                       // [i][K] q̂_i (fp32)
  s.win_v = at, at += round4(T * rows);                            // [i][rows] v_i
  s.sk = at, at += round4(T * rows);  // spec: [i][rows] S_base k̂_i; snapshot: y_i
  s.sq = at, at += spec ? round4(T * rows) : 0;                    // spec: [i][rows] S_base q̂_i
  s.tok = at, at += heads * 4 * round4(T);  // per head, per token: g, beta, e^g, e^G (window-local inclusive)
  // Per head [i][j]: e^(G_i - G_j), k̂_i.k̂_j, k̂_j.q̂_i, A, e^(G_i-G_j) k̂_j.q̂_i (the dot products are
  // the k-head's: head 0's sections hold them).
  s.pair = at, at += heads * 5 * TT;
  s.scalars = at, at += 4;  // [hh] = e^Gh of head hh
  s.target = at, at += round4(T);    // snapshot slots (int32)
  // Tensor cores: 16 zero bytes (the fold's ring rows past the history) and two chunks' partial
  // window products per warp (WindowMma::part_floats; ping-pong, so summing chunk c - 1 needs no
  // barrier of its own).
  s.zeros = at, at += tensor_cores || mma_fold_only ? 4 : 0;
  s.part = at, at += tensor_cores && !reg_stream ? 2 * kWarps * stage_rows(tile_rows, K, state_bytes) * 8 * ((2 * T + 7) / 8) : 0;
  // Register stream: the window's 2T vectors as bf16 hi and lo rows (window_split_stage).
  s.win_split = at, at += reg_stream ? window_split_floats(2 * T, K) : 0;
  s.total = at;
  return s;
}

// The window tile of the spec verify: the smallest power of two >= max_tokens (1, 2, 4, 8). The
// snapshot form loops over its tokens at run time and takes 0.
inline int spec_window_tile(int max_tokens) {
  int t = 1;
  while (t < max_tokens) t *= 2;
  return t;
}

// CTAs per SM the window kernel is built for (its register bound).
constexpr int kWindowMinCtas = 4;
// The register stream's second bound (window_reg_ctas picks it on grids of many waves): 5 CTAs per
// SM, 96 registers (ptxas, sm_90a: 12 / 32 bytes of spill stores / loads at K = 128, 28 / 76 at
// K = 256, against none at 128 registers). Its shared memory (43.6 KB at K = 128, R = 24, T = 8)
// fits 5 CTAs per SM.
constexpr int kWindowRegAltCtas = 5;
// Spec windows (kT) built with v-head pairs: at T = 8 a pair's extra shared memory fits 2 CTAs per
// SM instead of 3 at K = 128 with an fp32 checkpoint, and there it measured a 10 % loss, so those
// instances are not compiled (T = 4: window_stages).
constexpr int kMaxPairTokens = 4;

// q̂_i and k̂_i of window token i into shared memory: lane l converts elements l + 32 e, taken
// through q_at(e) / k_at(e) (loaded right there, or already in registers), and scales them by the
// L2 norms when the op asks for them.
template <int K, typename AT, typename QAt, typename KAt>
__device__ __forceinline__ void store_window_qk(const GdnParams& p, int i, int lane, QAt q_at, KAt k_at, float* s_win_q,
                                                float* s_win_k) {
  constexpr int kPerLane = K / 32;
  float qv[kPerLane], kv[kPerLane];
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    qv[e] = Elem<AT>::to_f32(q_at(e));
    kv[e] = Elem<AT>::to_f32(k_at(e));
    sq += qv[e] * qv[e], sk += kv[e] * kv[e];
  }
  float qscale = p.scale, kscale = 1.f;
  if (p.qk_l2norm) {
    sq = group_sum<32>(sq);
    sk = group_sum<32>(sk);
    qscale /= sqrtf(sq + 1e-6f);
    kscale = 1.f / sqrtf(sk + 1e-6f);
  }
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    s_win_q[i * K + lane + 32 * e] = qv[e] * qscale;
    s_win_k[i * K + lane + 32 * e] = kv[e] * kscale;
  }
}

// kT: the spec verify's window tile (spec_window_tile; 0 for the snapshot form). Instances with
// kWindowTensorCores stream a swizzled chunk and take its window products and fold on tensor cores
// (window_mma.cuh); the others take a state row's products on the CUDA cores. Every per-token
// section is sized for kT tokens and the window's k̂_i, q̂_i past the row's n are zero, so (CUDA
// cores) the 2 kT dot products of a state row are one unrolled pass whose sums reduce together (LaneSums):
// measured with ncu (Qwen3.5-4B, T = 4, non-flush), the per-token loop with its own dependent FMA
// chains and two 3-shuffle group sums per token held ~half of the kernel's stall samples.
//
// kHeads: v-heads per CTA. 2 (spec verify only) takes the two v-heads hv0, hv0 + 1 of one k-head
// with their whole V (tile_rows == V, one tile): q̂ / k̂ and their norms, the window's k̂.k̂ and
// k̂.q̂ products, the history's k_j staging and dot products and the ring's k̂ write are paid once
// for both, and the stream is their 2V contiguous state rows (v-heads are adjacent in the state);
// the gates, decays, solve matrices, history weights, ring u and v stay per head. A stage chunk
// never straddles the two heads (rows_per_stage divides V).
//
// kRegStream: the state stream through registers (window_stream.cuh; the launcher's
// window_reg_stream picks it), for the kWindowRegStreamBuilt instances. kMinCtas: the CTAs per SM
// the register bound is set for; kWindowMinCtas, or for the register stream also
// kWindowRegAltCtas (window_reg_ctas).
template <WindowMode WM, int kT, int K, typename ST, typename AT, int kHeads = 1, bool kRegStream = false,
          int kMinCtas = kWindowMinCtas>
__global__ void __launch_bounds__(kThreads, kMinCtas)
    gdn_window_kernel(const GdnParams p, const int tiles, const int tile_rows) {
  await_prior_grids();  // before any global memory access (common/dependent_launch.cuh)
  constexpr bool kSpec = WM == WindowMode::kSpecVerify;
  static_assert(kHeads == 1 || (kHeads == 2 && kSpec && kT <= kMaxPairTokens),
                "kHeads: 1, or 2 for the spec verify of up to kMaxPairTokens tokens");
  constexpr bool kTensorCores = kWindowTensorCores<WM, kT, ST, AT>;
  constexpr bool kMmaFoldOnly = kWindowMmaFoldOnly<WM, kT, ST, AT>;
  static_assert(!kRegStream || kWindowRegStreamBuilt<kSpec, kT, ST, AT>, "kRegStream: the kWindowRegStreamBuilt instances");
  static_assert(kMinCtas == kWindowMinCtas || (kRegStream && kMinCtas == kWindowRegAltCtas),
                "kMinCtas: kWindowMinCtas, or kWindowRegAltCtas for the register stream");
  // The register stream keeps one (empty) cp.async group for the ring entries only.
  constexpr int kBuffers = kRegStream ? 1 : window_stages<kHeads, kT, K, ST, kTensorCores>();
  static_assert(kSpec ? (kT >= 1 && kT <= kMaxSpecTokens && (kT & (kT - 1)) == 0) : kT == 0,
                "kT: the spec window tile (a power of two up to kMaxSpecTokens), 0 for the snapshot form");
  constexpr int kDots = kSpec ? 2 * kT : 2;  // dot products per state row: k̂_i then q̂_i, i < kT
  using Lanes = RowLanes<K, ST>;
  using Sums = LaneSums<Lanes::kLanes>;
  constexpr int kVec = Lanes::kVec;
  constexpr int kLanes = Lanes::kLanes;
  constexpr int kElems = Lanes::kElems;
  constexpr int kChunks = Lanes::kChunks;
  constexpr int kRowsPerWarp = 32 / kLanes;
  constexpr int kGroupsPerCta = kWarps * kRowsPerWarp;
  static_assert(K == 64 || K == 128 || K == 256, "K must be 64, 128 or 256");
  static_assert(kVec % 4 == 0, "window vectors are read as float4 at the state columns");

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int sub = lane % kLanes;  // lane within its row group
  const int grp = lane / kLanes;  // row group within the warp

  // Grid (tiles, HV, batch) (launch_tiled): no index divisions before the slot read.
  const int tile = blockIdx.x;
  const int hv0 = blockIdx.y * kHeads;  // this CTA's first v-head
  const int row = blockIdx.z;
  // The row's token range is requested beside its slot, and the slot's cursors right after the
  // slot, each ahead of the check before its use: as plain loads ptxas sank them past those
  // checks, and slot -> token range -> cursors -> ring and tokens were four memory latencies in a
  // row before the prologue's first product; now slot and token range -> cursors -> ring are three.
  // Not in the register stream, whose first state units go out right after the slot: the five
  // values held across them raised the T = 8 instance's spills (12 / 32 -> 16 / 64 bytes) and
  // slowed its rows at batch 256 / 512 by 2.1-2.7 % (H200, session 34), where the stage-buffer
  // instances gained up to 4 % at batch 1-8 and held level at 64-512.
  constexpr bool kEarlyRowReads = !kRegStream;
  int tok0 = 0, tok_end = 0;
  if constexpr (kEarlyRowReads) {
    tok0 = load_s32_here(p.cu_seqlens + row);
    tok_end = load_s32_here(p.cu_seqlens + row + 1);
  }
  const int32_t slot = p.slots[row];
  // The k-head, and whether hv0 is its first v-head (the CTA that appends k̂): two integer
  // divisions (about forty instructions), formed while the slot and the token range are on their
  // way. Written at their uses, they were formed after the early exits: in the early token loads,
  // again after the cursors' check (on the path from the cursors to the ring's copies) and once
  // more in the tail (sm_90a SASS, session 69). The empty asm keeps them here.
  const int v_per_k = p.HV / p.H;
  int h = hv0 / v_per_k;
  int k_group_first = hv0 == h * v_per_k;
  if constexpr (kEarlyRowReads) asm volatile("" : "+r"(h), "+r"(k_group_first));
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  int nh = 0, start = 0;  // history length and ring start (spec)
  bool fold = false;
  if constexpr (kSpec && kEarlyRowReads) {
    nh = load_s32_here(p.hist + slot);
    start = load_s32_here(p.start + slot);
    fold = load_s8_here(p.flush + slot) != 0;
  }
  const int V = p.V;
  const int rows = kHeads * tile_rows;  // the CTA's state rows: tile_rows of each head
  const int v0 = tile * tile_rows;
  // The window's token inputs at T = 2 / 4 (q / k of one token per warp, v of kVRounds rows per
  // thread), requested here, beside the cursors: they depend on the token range only, which came
  // with the slot. Requested after the ring's copies (which wait for the cursors) they were one
  // more memory latency on the way to the prologue's first barrier: slot -> cursors -> tokens.
  // Relaxed loads (load_elem_here), as ptxas would sink plain ones past the checks below. A row
  // outside the contract (n < 1 or n > kT) loads nothing here and returns below. The loads keep
  // the elements as stored and the stores below convert them: a conversion next to its load made
  // the warp wait there for the data.
  constexpr bool kEarlyTokens = kSpec && kT >= 2 && kT <= 4 && kEarlyRowReads;
  constexpr int kTokPerWarp = kEarlyTokens ? (kT + kWarps - 1) / kWarps : 1;
  constexpr int kVRounds = 2;
  constexpr int kPerLane = K / 32;  // elements of a token vector per lane (window preparation)
  AT q_raw[kTokPerWarp][kPerLane], k_raw[kTokPerWarp][kPerLane], v_raw[kVRounds][kEarlyTokens ? kT : 1];
  if constexpr (kEarlyTokens) {
    const int n_req = tok_end - tok0;
    if (n_req >= 1 && n_req <= kT) {
#pragma unroll
      for (int t = 0; t < kTokPerWarp; ++t) {
        const int64_t tok = tok0 + warp + t * kWarps;
        const AT* qrow = static_cast<const AT*>(p.q) + tok * p.q_row_stride + static_cast<int64_t>(h) * K;
        const AT* krow = static_cast<const AT*>(p.k) + tok * p.k_row_stride + static_cast<int64_t>(h) * K;
        if (warp + t * kWarps < n_req)
#pragma unroll
          for (int e = 0; e < kPerLane; ++e)
            q_raw[t][e] = load_elem_here(qrow + lane + 32 * e), k_raw[t][e] = load_elem_here(krow + lane + 32 * e);
      }
      const AT* const v_base = static_cast<const AT*>(p.v) + tok0 * p.v_row_stride + static_cast<int64_t>(hv0) * V + v0;
#pragma unroll
      for (int r = 0; r < kVRounds; ++r)
#pragma unroll
        for (int i = 0; i < kT; ++i)
          if (threadIdx.x + r * kThreads < rows && i < n_req)
            v_raw[r][i] = load_elem_here(v_base + i * p.v_row_stride + threadIdx.x + r * kThreads);
    }
  }
  const int64_t head_off = static_cast<int64_t>(hv0) * V * K;
  ST* const state_head = static_cast<ST*>(p.state) + static_cast<int64_t>(slot) * p.state_slot_stride + head_off;
  // Register stream: the warps' first units go out before the window's and the cursors' reads (they
  // depend on the slot only). The CTA's rows are contiguous: one tile of one head, or the whole V of
  // two adjacent heads.
  using RegStream = MmaStateStream<(kRegStream ? K : 32), kWarps, kHeads>;
  const RegStream reg_stream{reinterpret_cast<float*>(state_head + static_cast<int64_t>(v0) * K), rows, tile_rows};
  typename RegStream::Unit reg_cur;
  if constexpr (kRegStream) reg_stream.first_unit(reg_cur);
  const int T = kSpec ? kT : p.max_tokens;  // the per-token sections' size
  if constexpr (!kEarlyRowReads) {
    tok0 = p.cu_seqlens[row];
    tok_end = p.cu_seqlens[row + 1];
  }
  const int n = tok_end - tok0;
  // Outside the contract (only a caller bug produces it; checking would need a host sync): skipped.
  if (n < 1 || n > p.max_tokens || n > T) return;
  // The window's gates: lane idx < kHeads n of the last warp takes head idx / n, token idx % n. Its
  // inputs are requested here, beside the cursors, so that g's fp64 chain (token_log_decay) can run
  // while the ring is on its way (g in fp64 from loads issued after the ring's cost the T = 4 step
  // 5.7 % at batch 1); warps 0 .. kHeads - 1 take the history weights after the ring wait. At T = 1
  // the head's dt_bias and A_log are requested at the chain instead: requested here too, they took
  // the v-head pair instance from 96 to 100 registers and the T = 1 cycle at batch 256 lost 3 % (its
  // flush step 5.8 %), where requested at the chain it is level (Qwen3.5-4B, session 43).
  static_assert(kHeads * kMaxSpecTokens <= 32, "one gate lane of the last warp per (head, token)");
  const bool gate = warp == kWarps - 1 && lane < kHeads * n;
  const int gate_head = kHeads > 1 && lane >= n ? 1 : 0;
  const int gate_token = lane - gate_head * n;
  GateInputs<AT> gate_in{};
  constexpr bool kGateHeadFirst = kT != 1;
  if (gate) {
    load_gate_token(p, tok0 + gate_token, hv0 + gate_head, gate_in);
    if constexpr (kGateHeadFirst) load_gate_head(p, hv0 + gate_head, gate_in);
  }
  const int R = p.ring_len;

  if constexpr (kSpec) {
    if constexpr (!kEarlyRowReads) {
      nh = p.hist[slot];
      start = p.start[slot];
      fold = p.flush[slot] != 0;
    }
    // Commit keeps hist + n <= R and start in [0, R); a row whose cursors break that (which only
    // memory corruption produces) writes nothing rather than addressing outside the ring.
    if (nh < 0 || nh + n > R || start < 0 || start >= R) return;
    if (nh == 0) fold = false;  // folding an empty history rewrites S0 unchanged
  }

  // This lane's state elements of a row: chunk c, element e -> column kVec * (c * kLanes + sub) + e.
  auto col = [&](int c) { return Lanes::col(c, sub); };
  // This lane's 16 elements of a fp32 window vector in shared memory, at the state columns.
  auto load_cols = [&](const float* vec, float* out) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int e = 0; e < kVec; e += 4) {
        const float4 w = *reinterpret_cast<const float4*>(vec + col(c) + e);
        out[c * kVec + e] = w.x, out[c * kVec + e + 1] = w.y, out[c * kVec + e + 2] = w.z, out[c * kVec + e + 3] = w.w;
      }
    }
  };

  extern __shared__ __align__(16) float smem[];
  const int rows_per_stage = stage_rows(tile_rows, K, static_cast<int>(sizeof(ST)));
  // tile_rows and rows_per_stage are powers of two (V is 64, 128 or 256 and the tiles divide it;
  // choose_tiles checks it): divisions by them are shifts by stage_shift / u_shift below. As
  // integer divisions (about twenty instructions each with a run-time divisor) there were eight
  // in the CTA's head in the T = 4 pair instance (sm_90a SASS, session 69), most of them between
  // the cursors' arrival and the ring's copies. With the pair grid and the k-head below (session
  // 70, H100, B = 16, batch 256, cycle, tree / before, Qwen3.5-4B / 122B): T = 4 0.968 / 0.968 on 96
  // SMs (an H200's bandwidth per SM), 0.979 / 0.987 on all 132; T = 2 0.974 / 0.968 and 0.973 /
  // 0.981; T = 8 0.993 / 0.992 and 1.011 / 1.004; batch 1 0.92-0.96.
  const int stage_shift = __ffs(rows_per_stage) - 1;
  const int chunks_per_head = tile_rows >> stage_shift;
  const int num_chunks = kHeads * chunks_per_head;
  const int groups_per_stage = rows_per_stage / kRowsPerWarp;
  ST* const stage_base = reinterpret_cast<ST*>(smem);
  // Chunks [c, c + count) of the CTA's rows (contiguous in the state) asked of L2 by one thread:
  // the launcher's l2_lead_chunks puts more chunks on their way than the stage buffers hold.
  auto prefetch_chunks = [&](int c, int count) {
    const int c1 = min(num_chunks, c + count);
    if (p.l2_lead_chunks > 0 && threadIdx.x == 0 && c < c1)
      prefetch_l2_bulk(state_head + static_cast<int64_t>(v0 + c * rows_per_stage) * K,
                       static_cast<uint32_t>((c1 - c) * rows_per_stage * K * sizeof(ST)));
  };
  // A chunk's 16-byte pieces i = threadIdx.x + m kThreads (m < kPieceRounds) go to this thread.
  // Their offsets within a chunk are the same for every chunk, so they are set up once here rather
  // than per chunk: computed per piece and chunk, the copy with its 64-bit address arithmetic took
  // 85 of the 256 instructions a warp issued per chunk of the v-head pairs at T = 4 (ncu, session
  // 30). Tensor cores: the swizzled layout (kSwizzleRows): the key of piece i is its row & 7, and as
  // a row has >= 8 pieces and kThreads is a multiple of a row's pieces,
  // (threadIdx.x + m kThreads) ^ key = (threadIdx.x ^ key) + m kThreads.
  constexpr int kPer16 = 16 / static_cast<int>(sizeof(ST));
  constexpr int kRowPieces = K / kPer16;
  static_assert(kRowPieces >= kSwizzleRows && kThreads % kRowPieces == 0, "the piece layout of issue_chunk");
  static_assert(kStageBytes / 16 % kThreads == 0, "kPieceRounds rounds of kThreads pieces cover a stage buffer");
  constexpr int kPieceRounds = kStageBytes / 16 / kThreads;
  constexpr int kSwz = kTensorCores ? kSwizzleRows - 1 : 0;
  // kMmaFoldOnly: only the chunks of a folding CTA are swizzled (fold is final here), for
  // fold_chunk_mma; the others keep the plain layout of the CUDA-core products.
  const int swz = kMmaFoldOnly && fold ? kSwizzleRows - 1 : kSwz;
  const int chunk_pieces = rows_per_stage * K / kPer16;
  const int piece_row = threadIdx.x / kRowPieces;
  const ST* const thread_src = state_head + static_cast<int64_t>(v0) * K + threadIdx.x * kPer16;
  // Chunk c of the tile into buffer c % kBuffers; every thread commits a group, empty or not, so
  // the group counts stay uniform.
  auto issue_chunk = [&](int c) {
    if (c < num_chunks) {
      const ST* const src = thread_src + static_cast<int64_t>(c) * rows_per_stage * K;
      ST* const dst = stage_base + (c % kBuffers) * rows_per_stage * K;
#pragma unroll
      for (int m = 0; m < kPieceRounds; ++m) {
        const int key = (piece_row + m * (kThreads / kRowPieces)) & swz;
        if (threadIdx.x + m * kThreads < chunk_pieces)
          cp_async16(dst + ((threadIdx.x ^ key) + m * kThreads) * kPer16, src + m * kThreads * kPer16);
      }
      // Chunk c + l2_lead_chunks to L2 (the first l2_lead_chunks past the prologue's go out together,
      // below).
      if (c >= kBuffers - 1) prefetch_chunks(c + p.l2_lead_chunks, 1);
    }
    cp_async_commit();
  };
  const WindowSmem lay = window_smem(kSpec, kTensorCores, R, T, tile_rows, K, static_cast<int>(sizeof(ST)),
                                     static_cast<int>(sizeof(AT)), kHeads, kBuffers, kRegStream, kMmaFoldOnly);
  AT* const s_ring_k_raw = reinterpret_cast<AT*>(smem + lay.ring_k_raw);
  AT* const s_ring_u_raw = reinterpret_cast<AT*>(smem + lay.ring_u_raw);
  float* const s_ring_g = smem + lay.ring_g;
  float* const s_weight = smem + lay.weight;
  float* const s_coef_k = smem + lay.coef_k;
  float* const s_coef_q = smem + lay.coef_q;
  float* const s_win_k = smem + lay.win_k;
  float* const s_win_q = smem + lay.win_q;
  float* const s_win_v = smem + lay.win_v;
  float* const s_sk = smem + lay.sk;
  float* const s_sq = smem + lay.sq;
  const int T4 = round4(T);
  const int R4 = round4(R);
  // Per head hh: the token section at + hh * tok_step, the pair section at + hh * pair_step, the
  // history g and weights at + hh * R4, ring u at + hh * R * tile_rows.
  const int tok_step = 4 * T4;
  float* const s_g = smem + lay.tok;
  float* const s_beta = s_g + T4;
  float* const s_eg = s_beta + T4;       // e^g_i
  float* const s_eG = s_eg + T4;         // e^G_i
  const int TT = round4(T * T);
  const int pair_step = 5 * TT;
  float* const s_decay = smem + lay.pair;  // [i * T + j] e^(G_i - G_j), j <= i
  float* const s_kk = s_decay + TT;        // [i * T + j] k̂_i . k̂_j, j < i (the k-head's: head 0)
  float* const s_kq = s_kk + TT;           // [i * T + j] k̂_j . q̂_i, j <= i (the k-head's: head 0)
  float* const s_amat = s_kq + TT;         // [i * T + j] A[i, j], j < i
  float* const s_dmat = s_amat + TT;       // [i * T + j] e^(G_i - G_j) k̂_j . q̂_i, j <= i
  float* const s_scalars = smem + lay.scalars;
  int32_t* const s_target = reinterpret_cast<int32_t*>(smem + lay.target);
  float* const s_zeros = smem + lay.zeros;
  float* const s_part = smem + lay.part;
  if ((kTensorCores || kMmaFoldOnly) && threadIdx.x < 4) s_zeros[threadIdx.x] = 0.f;  // published by the barrier after the ring wait

  // The kDots dot products of this lane's kElems columns of x with the window's k̂_i (m < kT) and
  // q̂_i (m = kT + i), reduced over the row group: v[m'] then holds sum first_sum + m' (LaneSums).
  // Two accumulators per product halve the dependent FMA chain.
  auto window_dots = [&](const float* x, float (&v)[kDots]) {
#pragma unroll
    for (int m = 0; m < kDots; ++m) {
      float wv[kElems];
      load_cols(m < kDots / 2 ? s_win_k + m * K : s_win_q + (m - kDots / 2) * K, wv);
      float a = 0.f, b = 0.f;
#pragma unroll
      for (int e = 0; e < kElems; e += 2) a = fmaf(x[e], wv[e], a), b = fmaf(x[e + 1], wv[e + 1], b);
      v[m] = a + b;
    }
    Sums::template row_sums<kDots>(v, sub);
  };
  // The sums this lane holds after window_dots (LaneSums): it writes v[m] for m < kHeld, the sum
  // of product held_first + m, i.e. token (held_first + m) % (kDots / 2), q̂ when >= kDots / 2.
  constexpr int kHeld = Sums::template kept_sums<kDots>();
  const bool holder = Sums::template sum_holder<kDots>(sub);
  const int held_first = Sums::template first_sum<kDots>(sub);

  // ---- loads: the ring entries (cp.async group 0, empty for the snapshot form), the first state
  // chunks (groups 1 .. kBuffers - 1), then the window's tokens with ordinary loads.
  if constexpr (kSpec) {
    const AT* ring_k = static_cast<const AT*>(p.ring_k) + static_cast<int64_t>(slot) * p.ring_k_slot_stride +
                       static_cast<int64_t>(h) * R * K;
    constexpr int kPer16 = 16 / static_cast<int>(sizeof(AT));
    const int k_pieces = K / kPer16, u_pieces = tile_rows / kPer16, u_shift = __ffs(u_pieces) - 1;
    for (int i = threadIdx.x; i < nh * k_pieces; i += kThreads) {
      const int j = i / k_pieces, c = i % k_pieces;
      cp_async16(s_ring_k_raw + j * K + c * kPer16, ring_k + static_cast<int64_t>(ring_index_checked(start, j, R)) * K + c * kPer16);
    }
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const AT* ring_u = static_cast<const AT*>(p.ring_u) + static_cast<int64_t>(slot) * p.ring_u_slot_stride +
                         static_cast<int64_t>(hv0 + hh) * R * V + v0;
      const float* ring_g =
          p.ring_g + static_cast<int64_t>(slot) * p.ring_g_slot_stride + static_cast<int64_t>(hv0 + hh) * R;
      AT* const dst_u = s_ring_u_raw + hh * R * tile_rows;
      for (int i = threadIdx.x; i < nh * u_pieces; i += kThreads) {
        const int j = i >> u_shift, c = i & (u_pieces - 1);
        cp_async16(dst_u + j * tile_rows + c * kPer16,
                   ring_u + static_cast<int64_t>(ring_index_checked(start, j, R)) * V + c * kPer16);
      }
      for (int j = threadIdx.x; j < nh; j += kThreads)
        cp_async4(s_ring_g + hh * R4 + j, ring_g + ring_index_checked(start, j, R));
    }
  }
  cp_async_commit();
  if constexpr (!kRegStream) {
#pragma unroll
    for (int c = 0; c < kBuffers - 1; ++c) issue_chunk(c);
    prefetch_chunks(kBuffers - 1, p.l2_lead_chunks);
  }

  // The window's token inputs into shared memory: q̂_i and k̂_i (warp w takes tokens w, w + kWarps,
  // ...; lane l holds elements l + 32 e), the gates (the gate lanes, above: g, beta, e^g; the
  // snapshot targets, thread i token i) and v of the CTA's rows (row vl is element hv0 V + v0 + vl
  // of a token's (HV, V) v; the heads are adjacent, kHeads == 2 only with v0 = 0 and
  // tile_rows = V).
  auto store_gates = [&] {
    if (gate) {
      if constexpr (!kGateHeadFirst) load_gate_head(p, hv0 + gate_head, gate_in);
      const float g = token_log_decay(gate_in);
      s_g[gate_head * tok_step + gate_token] = g;
      s_beta[gate_head * tok_step + gate_token] = token_beta(gate_in);
      s_eg[gate_head * tok_step + gate_token] = expf(g);
    }
  };
  if constexpr (kEarlyTokens) {
    // Every load first (above, beside the cursors), then every use: as one loop per input (each
    // waiting for its own loads before the next loop's were issued) the prologue waited three to
    // four memory latencies here, 5.4 % of the T = 4 pairs' non-flush samples (ncu, session 30);
    // loaded together after the ring's copies they took 3.6-4 % off the T = 2 / 4 cycles (session
    // 32). kT bounds the tokens, so the loads fit in registers; a CTA's rows past kVRounds kThreads,
    // if any, load as they are stored.
    auto load_v = [&](int vl, int i) {
      return static_cast<const AT*>(p.v)[(tok0 + i) * p.v_row_stride + static_cast<int64_t>(hv0) * V + v0 + vl];
    };
    store_gates();  // first: its inputs came a memory latency before the tokens'
#pragma unroll
    for (int t = 0; t < kTokPerWarp; ++t)
      if (warp + t * kWarps < n)
        store_window_qk<K, AT>(p, warp + t * kWarps, lane, [&](int e) { return q_raw[t][e]; },
                               [&](int e) { return k_raw[t][e]; }, s_win_q, s_win_k);
    // Window rows n .. kT-1: zeros, so the unrolled dot products past n add nothing.
    for (int idx = n * K + threadIdx.x; idx < kT * K; idx += kThreads) s_win_q[idx] = 0.f, s_win_k[idx] = 0.f;
#pragma unroll
    for (int r = 0; r < kVRounds; ++r)
#pragma unroll
      for (int i = 0; i < kT; ++i)
        if (threadIdx.x + r * kThreads < rows && i < n)
          s_win_v[i * rows + threadIdx.x + r * kThreads] = Elem<AT>::to_f32(v_raw[r][i]);
    for (int vl = threadIdx.x + kVRounds * kThreads; vl < rows; vl += kThreads)
      for (int i = 0; i < n; ++i) s_win_v[i * rows + vl] = Elem<AT>::to_f32(load_v(vl, i));
  } else {
    // T = 1 and 8, and the snapshot form (T = max_tokens, not bounded at compile time): one loop per
    // input, converting as it loads. Holding T = 8's tokens in registers made ptxas spill in the
    // register stream's instances, and at T = 1 it raised the one-head instances from 96 to 100-105
    // registers (sm_90a, session 31). These loops stay clear of the T = 2 / 4 branch's lambdas on
    // purpose: sharing them (session 32's first try; even lambdas defined before the branch and
    // unused in it) changed the SASS of every T = 1 / 8 instance, and T = 8 measured 0.9-1.7 %
    // slower at batch 256 / 512 (store_gates, shared since session 43, is the exception).
    store_gates();  // first: its inputs came a memory latency before the tokens'
    for (int i = warp; i < n; i += kWarps) {
      const int64_t tok = tok0 + i;
      const AT* qrow = static_cast<const AT*>(p.q) + tok * p.q_row_stride + static_cast<int64_t>(h) * K;
      const AT* krow = static_cast<const AT*>(p.k) + tok * p.k_row_stride + static_cast<int64_t>(h) * K;
      store_window_qk<K, AT>(p, i, lane, [&](int e) { return qrow[lane + 32 * e]; },
                             [&](int e) { return krow[lane + 32 * e]; }, s_win_q, s_win_k);
    }
    if constexpr (kSpec)  // window rows n .. kT-1: zeros, so the unrolled dot products past n add nothing
      for (int idx = n * K + threadIdx.x; idx < kT * K; idx += kThreads) s_win_q[idx] = 0.f, s_win_k[idx] = 0.f;
    if constexpr (!kSpec)
      for (int i = threadIdx.x; i < n; i += kThreads)
        s_target[i] = p.snapshot_slots[static_cast<int64_t>(row) * p.snapshot_stride + i];
    for (int vl = threadIdx.x; vl < rows; vl += kThreads)
      for (int i = 0; i < n; ++i)
        s_win_v[i * rows + vl] = Elem<AT>::to_f32(
            static_cast<const AT*>(p.v)[(tok0 + i) * p.v_row_stride + static_cast<int64_t>(hv0) * V + v0 + vl]);
  }
  cp_async_wait<kBuffers - 1>();  // group 0: the ring entries
  __syncthreads();

  if constexpr (kSpec) {
    // Window decays of each head from direct partial sums of g (not differences of the cumsum).
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const float* const g_h = s_g + hh * tok_step;
      // Pairs (i, j) on a kT-wide grid (i = idx / kT: a shift), not an n-wide one (a division by
      // the run-time n, about twenty instructions, in each of these loops).
      for (int idx = threadIdx.x; idx < n * kT; idx += kThreads) {
        const int i = idx / kT, j = idx % kT;
        if (j <= i) {
          float sum = 0.f;
          for (int l = j + 1; l <= i; ++l) sum += g_h[l];
          s_decay[hh * pair_step + i * T + j] = expf(sum);
        }
      }
      for (int i = threadIdx.x; i < n; i += kThreads) {
        float sum = 0.f;
        for (int l = 0; l <= i; ++l) sum += g_h[l];
        s_eG[hh * tok_step + i] = expf(sum);
      }
    }
    if constexpr (kRegStream)  // s_win_q follows s_win_k: the window's 2 kT vectors as [m][K]
      window_split_stage<K, kThreads>(s_win_k, kDots, reinterpret_cast<__nv_bfloat16*>(smem + lay.win_split),
                                      reinterpret_cast<__nv_bfloat16*>(smem + lay.win_split) +
                                          kDots * ldmatrix_row_stride(K));
    if (warp < kHeads)  // e^(Gh - Gh_j) and e^Gh of head `warp`
      history_weights(nh, lane, s_ring_g + warp * R4, s_weight + warp * R4, &s_scalars[warp]);
    // Window dot products, one row group per pair (i, j), j <= i; warp-uniform trip count, as the
    // group sums need every lane of the warp.
    for (int pb = warp * kRowsPerWarp; pb < n * kT; pb += kGroupsPerCta) {
      const int pi = pb + grp;
      int i = pi / kT, j = pi % kT;
      const bool live = pi < n * kT && j <= i;
      if (!live) i = 0, j = 0;
      float ki[kElems], kj[kElems], qi[kElems];
      load_cols(s_win_k + i * K, ki);
      load_cols(s_win_k + j * K, kj);
      load_cols(s_win_q + i * K, qi);
      float kk = 0.f, kq = 0.f;
#pragma unroll
      for (int e = 0; e < kElems; ++e) kk += ki[e] * kj[e], kq += kj[e] * qi[e];
      kk = group_sum<kLanes>(kk);
      kq = group_sum<kLanes>(kq);
      if (sub == 0 && live) s_kk[i * T + j] = kk, s_kq[i * T + j] = kq;
    }
    // History dot products k_j . k̂_i and k_j . q̂_i (non-flush rows), one row group per entry.
    if (!fold) {
      for (int jb = warp * kRowsPerWarp; jb < nh; jb += kGroupsPerCta) {
        const int j = jb + grp;
        const bool live = j < nh;
        float kj[kElems];
        load_ring_k_cols<K, ST>(s_ring_k_raw + j * K, live, sub, kj);
        float v[kDots];
        window_dots(kj, v);
        if (live && holder) {
#pragma unroll
          for (int m = 0; m < kHeld; ++m) {
            const int i = (held_first + m) % (kDots / 2);
            if (i < n) (held_first + m >= kDots / 2 ? s_coef_q : s_coef_k)[j * T + i] = v[m];
          }
        }
      }
    }
    __syncthreads();

    // The solve's matrices of each head, and the history terms per tile row (non-flush rows). The
    // state stream's first barrier publishes them.
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      const int ps = hh * pair_step;
      for (int idx = threadIdx.x; idx < n * kT; idx += kThreads) {
        const int i = idx / kT, j = idx % kT;
        if (j < i) s_amat[ps + i * T + j] = s_beta[hh * tok_step + i] * s_decay[ps + i * T + j] * s_kk[i * T + j];
        if (j <= i) s_dmat[ps + i * T + j] = s_decay[ps + i * T + j] * s_kq[i * T + j];
      }
    }
    // One CTA row per thread and every token at once: one pass over the history for all kT
    // sums (rows of coef_k / coef_q are kT contiguous floats; entries i >= n are never written and
    // their sums are dropped).
    if (!fold) {
      for (int vl = threadIdx.x; vl < rows; vl += kThreads) {
        const int hh = kHeads > 1 && vl >= tile_rows ? 1 : 0, vh = vl - hh * tile_rows;
        const float* const w_h = s_weight + hh * R4;
        const AT* const u_h = s_ring_u_raw + hh * R * tile_rows;
        float hk[kT], hq[kT];
#pragma unroll
        for (int i = 0; i < kT; ++i) hk[i] = 0.f, hq[i] = 0.f;
        for (int j = 0; j < nh; ++j) {
          const float wu = w_h[j] * Elem<AT>::to_f32(u_h[j * tile_rows + vh]);
          float ck[kT], cq[kT];
          load_smem_row<kT>(s_coef_k + j * kT, ck);
          load_smem_row<kT>(s_coef_q + j * kT, cq);
#pragma unroll
          for (int i = 0; i < kT; ++i) hk[i] += ck[i] * wu, hq[i] += cq[i] * wu;
        }
#pragma unroll
        for (int i = 0; i < kT; ++i)
          if (i < n) s_sk[i * rows + vl] = hk[i], s_sq[i * rows + vl] = hq[i];
      }
    }
  }

  // ---- the state stream: chunk c waits for its cp.async group, the barrier publishes it (and
  // frees the buffer of chunk c - 1, which chunk c + kBuffers - 1 then refills). Chunk c
  // belongs to head chunk_head(c); its fold and S_base use that head's e^Gh, weights and ring u.
  auto chunk_head = [&](int c) { return kHeads > 1 && c >= chunks_per_head ? 1 : 0; };
  if constexpr (kRegStream) {
    __syncthreads();  // the history terms (non-flush rows) in s_sk / s_sq before the products add to them
    const auto* const bf = reinterpret_cast<const __nv_bfloat16*>(smem + lay.win_split);
    const MmaFold f{fold, nh, R, R4, s_scalars, s_weight, reinterpret_cast<const __nv_bfloat16*>(s_ring_u_raw),
                    tile_rows, reinterpret_cast<const __nv_bfloat16*>(s_ring_k_raw), K,
                    reinterpret_cast<const __nv_bfloat16*>(s_zeros)};
    WindowStreamProducts<kT, kHeads> products{bf, bf + kDots * ldmatrix_row_stride(K), ldmatrix_row_stride(K), n,
                                              s_sk, s_sq, rows, tile_rows, fold, s_scalars};
    reg_stream.run(reg_cur, f, products);
  } else if constexpr (kTensorCores) {
    using Mma = std::conditional_t<std::is_same_v<ST, float>, WindowMma<K, kDots>, WindowMmaBf16<K, kDots>>;
    const int part_size = Mma::part_floats(rows_per_stage);
    typename Mma::BFrags held;  // the window's B fragments, in registers over the whole stream
    Mma::load_all_b(s_win_k, warp, lane, held);  // s_win_q follows s_win_k
    // Chunk c's products into S_base k̂_i and S_base q̂_i: the folded chunk is S_base; otherwise
    // e^Gh S0 + the history terms already there. A thread takes row fin_row of every chunk and
    // outputs fin_m, fin_m + fin_step, ... (rows_per_stage is a power of two up to 32; dividing
    // once here, not per chunk: the per-chunk division sat on the path after the barrier and held
    // 11 % of the stall samples, ncu).
    const int fin_row = threadIdx.x & (rows_per_stage - 1);
    const int fin_m = threadIdx.x >> stage_shift, fin_step = kThreads >> stage_shift;
    // A thread's outputs are fin_m + j fin_step, j < kDots / fin_step: at most kFinishMax of them,
    // rows_per_stage being at most kMaxStageRows (stage_rows' bound, written out: calling it as
    // constexpr reordered a K = 256 instance's SASS, session 33) and a power of two (so it divides
    // kThreads). As `m < kDots; m += fin_step` the loop's trip count was worked out at run time in
    // every chunk, with a remainder loop and branches around each output (sm_90a SASS, session 32),
    // where the T = 4 pairs at K = 128 (16 rows per stage) have exactly one output per thread.
    constexpr int kMaxStageRows = kStageBytes / (K * static_cast<int>(sizeof(ST)));
    constexpr int kFinishMax = (kDots * kMaxStageRows + kThreads - 1) / kThreads;
    auto finish_chunk = [&](int c, bool folding) {
      const float* part = s_part + (c & 1) * part_size;
      const float eGh = s_scalars[chunk_head(c)];
#pragma unroll
      for (int j = 0; j < kFinishMax; ++j) {
        const int m = fin_m + j * fin_step;
        const int r = fin_row;
        const int i = m % kT;
        if (m < kDots && i < n) {
          const float x = Mma::total(part, rows_per_stage, r, m);
          float* const dst = (m >= kT ? s_sq : s_sk) + i * rows + c * rows_per_stage + r;
          *dst = folding ? x : eGh * x + *dst;
        }
      }
    };
    // Fold CTAs and the others run separate copies of the loop (`folding` is a constant in each),
    // as in the row kernel: the tensor-core fold's registers then stay out of the non-flush loop.
    auto stream = [&](const bool folding) {
      for (int chunk = 0; chunk < num_chunks; ++chunk) {
        cp_async_wait<kBuffers - 2>();
        __syncthreads();  // also: every warp's partials of chunk - 1 are in
        issue_chunk(chunk + kBuffers - 1);
        if (chunk > 0) finish_chunk(chunk - 1, folding);
        ST* const buf = stage_base + (chunk % kBuffers) * rows_per_stage * K;
        if (folding) {
          const int hh = chunk_head(chunk);
          fold_chunk_mma<K, ST>(buf, (chunk - hh * chunks_per_head) * rows_per_stage, rows_per_stage,
                                   s_scalars[hh], nh, s_weight + hh * R4, s_ring_k_raw,
                                   s_ring_u_raw + hh * R * tile_rows, tile_rows,
                                   reinterpret_cast<const __nv_bfloat16*>(s_zeros));
          __syncthreads();  // the stores and the products below read other warps' columns
          // The folded chunk is the new checkpoint (the only state write of a verify step).
          for (int gi = warp; gi < groups_per_stage; gi += kWarps) {
            const int rr = gi * kRowsPerWarp + grp;
            float s[kElems];
            load_state_row<K, ST>(buf + rr * K, sub, rr & (kSwizzleRows - 1), s);
            store_state_row<K, ST>(state_head + static_cast<int64_t>(v0 + chunk * rows_per_stage + rr) * K, sub, s);
          }
        }
        Mma::chunk(buf, rows_per_stage, held, s_part + (chunk & 1) * part_size);
      }
      cp_async_wait<0>();
      __syncthreads();
      finish_chunk(num_chunks - 1, folding);
    };
    if (fold) {
      stream(true);
    } else {
      stream(false);
    }
  } else {
    for (int chunk = 0; chunk < num_chunks; ++chunk) {
      cp_async_wait<kBuffers - 2>();
      __syncthreads();
      issue_chunk(chunk + kBuffers - 1);
      ST* const buf = stage_base + (chunk % kBuffers) * rows_per_stage * K;
      const int hh = chunk_head(chunk);
      const float eGh = kSpec ? s_scalars[hh] : 1.f;
      if (kSpec && fold) {
        // S_base = e^Gh S0 + sum_j (e^(Gh-Gh_j) u_j) k_j^T on the chunk, in shared memory: on tensor
        // cores where kMmaFoldOnly, else on the CUDA cores.
        if constexpr (kMmaFoldOnly)
          fold_chunk_mma<K, ST>(buf, (chunk - hh * chunks_per_head) * rows_per_stage, rows_per_stage, eGh, nh,
                                s_weight + hh * R4, reinterpret_cast<const __nv_bfloat16*>(s_ring_k_raw),
                                reinterpret_cast<const __nv_bfloat16*>(s_ring_u_raw + hh * R * tile_rows), tile_rows,
                                reinterpret_cast<const __nv_bfloat16*>(s_zeros));
        else
          fold_chunk_fma<K, ST, AT>(buf, (chunk - hh * chunks_per_head) * rows_per_stage, rows_per_stage, eGh, nh,
                                    s_weight + hh * R4, s_ring_k_raw, s_ring_u_raw + hh * R * tile_rows, tile_rows);
        __syncthreads();  // the row groups below read other threads' columns
      }
      for (int gi = warp; gi < groups_per_stage; gi += kWarps) {  // warp-uniform
        const int rr = gi * kRowsPerWarp + grp;    // row within the chunk
        const int vl = chunk * rows_per_stage + rr;  // row within the CTA's rows
        float s[kElems];
        load_state_row<K, ST>(buf + rr * K, sub, kMmaFoldOnly && fold ? rr & (kSwizzleRows - 1) : 0, s);
        const int64_t row_off = static_cast<int64_t>(v0 + vl) * K;

        if constexpr (kSpec) {
          if (fold) {
            // The folded chunk is the new checkpoint (the only state write of a verify step).
            store_state_row<K, ST>(state_head + row_off, sub, s);
          }
          float v[kDots];
          window_dots(s, v);
          // S_base k̂_i and S_base q̂_i: the folded chunk is S_base; otherwise e^Gh S0 + history.
          if (holder) {
  #pragma unroll
            for (int m = 0; m < kHeld; ++m) {
              const int i = (held_first + m) % (kDots / 2);
              if (i < n) {
                float* const dst = (held_first + m >= kDots / 2 ? s_sq : s_sk) + i * rows + vl;
                *dst = fold ? v[m] : eGh * v[m] + *dst;
              }
            }
          }
        } else {
          for (int i = 0; i < n; ++i) {
            const float eg = s_eg[i];
            float wv[kElems];
            load_cols(s_win_k + i * K, wv);
            float dk = 0.f;
  #pragma unroll
            for (int e = 0; e < kElems; ++e) s[e] *= eg, dk += s[e] * wv[e];
            dk = group_sum<kLanes>(dk);
            const float uu = s_beta[i] * (s_win_v[i * tile_rows + vl] - dk);
  #pragma unroll
            for (int e = 0; e < kElems; ++e) s[e] += uu * wv[e];
            load_cols(s_win_q + i * K, wv);
            float dq = 0.f;
  #pragma unroll
            for (int e = 0; e < kElems; ++e) dq += s[e] * wv[e];
            dq = group_sum<kLanes>(dq);
            if (sub == 0) s_sk[i * tile_rows + vl] = dq;  // y_i
            const int32_t target = s_target[i];
            if (slot_is_live(target, p.null_slot, p.num_slots)) {
              ST* const dst =
                  static_cast<ST*>(p.state) + static_cast<int64_t>(target) * p.state_slot_stride + head_off + row_off;
              store_state_row<K, ST>(dst, sub, s);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- outputs and ring appends.
  // Row vl of the CTA is element hv0 V + v0 + vl of a token's (HV, V) output (heads adjacent).
  AT* const out = static_cast<AT*>(p.out) + static_cast<int64_t>(hv0) * V + v0;
  if constexpr (kSpec) {
    // The solve, per row: forward substitution u_i = R_i - sum_{j<i} A[i,j] u_j, with the row's
    // head's gates and matrices.
    // kTokenRows: token i's output row and ring entry, the same for every row of the CTA, formed
    // once per thread before the rows. Per row and token they were ~25 of ~40 instructions of 64-bit
    // address arithmetic (sm_90a, the T = 4 pairs), all of it after the stream, where the CTA has
    // no bytes in flight. H100, Qwen3.5-4B / 122B, B = 16 (session 68): T = 4 cycle at batch 256
    // -0.6 / -0.3 % on 132 SMs and -1.1 / -0.6 % on 96, batch 1 -2.2 / -1.9 %; T = 8 at batch 256
    // +0.4 % on both, so the 8-token tile keeps the per-row form. In the CUDA-core and register-
    // stream instances ptxas raised T = 1 from 96 to 100-108 registers (5 CTAs per SM by registers
    // to 4) and spilled in some T = 2 / 8 ones (sm_90a): they keep it too.
    constexpr bool kTokenRows = kTensorCores && !kRegStream && kT <= 4;
    constexpr int kSolveTokens = kTokenRows ? kT : kMaxSpecTokens;  // the spec window holds n <= kT
    AT* out_tok[kTokenRows ? kT : 1];
    int32_t ring_entry[kTokenRows ? kT : 1];  // the entry's offset in a v-head's ring rows
    if constexpr (kTokenRows) {
#pragma unroll
      for (int i = 0; i < kT; ++i) {
        const int ii = i < n ? i : 0;
        out_tok[i] = out + (tok0 + ii) * p.out_row_stride;
        ring_entry[i] = ring_index_checked(start, nh + ii, R) * V;
      }
    }
    for (int vl = threadIdx.x; vl < rows; vl += kThreads) {
      const int hh = kHeads > 1 && vl >= tile_rows ? 1 : 0, vh = vl - hh * tile_rows;
      const float* const beta_h = s_beta + hh * tok_step;
      const float* const eG_h = s_eG + hh * tok_step;
      const float* const amat_h = s_amat + hh * pair_step;
      const float* const dmat_h = s_dmat + hh * pair_step;
      AT* const ring_u = static_cast<AT*>(p.ring_u) + static_cast<int64_t>(slot) * p.ring_u_slot_stride +
                         static_cast<int64_t>(hv0 + hh) * R * V + v0 + vh;
      float u[kSolveTokens];
#pragma unroll
      for (int i = 0; i < kSolveTokens; ++i) {
        if (i < n) {
          const int idx = i * rows + vl;
          float r = beta_h[i] * (s_win_v[idx] - eG_h[i] * s_sk[idx]);
#pragma unroll
          for (int j = 0; j < i; ++j) r -= amat_h[i * T + j] * u[j];
          u[i] = r;
          float y = eG_h[i] * s_sq[idx];
#pragma unroll
          for (int j = 0; j <= i; ++j) y += dmat_h[i * T + j] * u[j];
          if constexpr (kTokenRows) {
            out_tok[i][vl] = Elem<AT>::from_f32(y);
            ring_u[ring_entry[i]] = Elem<AT>::from_f32(r);
          } else {
            out[(tok0 + i) * p.out_row_stride + vl] = Elem<AT>::from_f32(y);
            ring_u[static_cast<int64_t>(ring_index_checked(start, nh + i, R)) * V] = Elem<AT>::from_f32(r);
          }
        }
      }
    }
    if (tile == 0) {
      for (int idx = threadIdx.x; idx < kHeads * n; idx += kThreads) {
        const int hh = kHeads > 1 && idx >= n ? 1 : 0, i = idx - hh * n;
        float* const ring_g =
            p.ring_g + static_cast<int64_t>(slot) * p.ring_g_slot_stride + static_cast<int64_t>(hv0 + hh) * R;
        ring_g[ring_index_checked(start, nh + i, R)] = s_g[hh * tok_step + i];
      }
      // k̂ is shared by the v-heads of a k-group: the CTA of the group's first v-head appends it.
      if (k_group_first) {
        AT* const ring_k = static_cast<AT*>(p.ring_k) + static_cast<int64_t>(slot) * p.ring_k_slot_stride +
                           static_cast<int64_t>(h) * R * K;
        for (int idx = threadIdx.x; idx < n * K; idx += kThreads) {
          const int i = idx / K, e = idx % K;
          ring_k[static_cast<int64_t>(ring_index_checked(start, nh + i, R)) * K + e] = Elem<AT>::from_f32(s_win_k[idx]);
        }
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < n * tile_rows; idx += kThreads) {
      const int i = idx / tile_rows, vl = idx % tile_rows;
      out[(tok0 + i) * p.out_row_stride + vl] = Elem<AT>::from_f32(s_sk[idx]);
    }
  }
}

}  // namespace replayssm::gdn
