// Launch plumbing of the Mamba-2 kernels: the dtype / dstate dispatch, the choice of the P chunk
// per CTA, the shared-memory opt-in. Included by the csrc/kernels/mamba2_*.cu instantiation files,
// one state dtype per file so that the files compile in parallel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/common/heads_per_cta.cuh"
#include "replayssm/mamba2/launch.h"
#include "replayssm/mamba2/state_dispatch.h"
#include "replayssm/mamba2/params.h"
#include "replayssm/mamba2/replay_kernel.cuh"
#include "replayssm/mamba2/spec_kernel.cuh"
#include "replayssm/mamba2/state_update_kernel.cuh"
#include "replayssm/mamba2/state_update_rows.cuh"
#include "replayssm/mamba2/warp_rows.cuh"

namespace replayssm::mamba2 {

namespace detail {

constexpr int kWarps = 4;
// CTAs per SM worth of work before the P dimension stops being split (small batches only).
constexpr int kCtasPerSmTarget = 8;

// Rows of P per CTA: whole heads at large batch; at small batch the head is split into chunks
// (multiples of one iteration's rows) until about kCtasPerSmTarget CTAs per SM exist, so that a
// batch of 1 still spreads its state over every SM. Chunks are balanced: P = 80 in two chunks is
// 48 + 32.
template <int kRowsPerIter>
int choose_p_chunk(int P, int64_t heads_total) {
  const int iters_total = (P + kRowsPerIter - 1) / kRowsPerIter;
  const int64_t target = static_cast<int64_t>(kCtasPerSmTarget) * num_sms();
  int64_t chunks = heads_total > 0 ? (target + heads_total - 1) / heads_total : 1;
  if (chunks < 1) chunks = 1;
  if (chunks > iters_total) chunks = iters_total;
  const int chunk_iters = (iters_total + static_cast<int>(chunks) - 1) / static_cast<int>(chunks);
  const int p_chunk = chunk_iters * kRowsPerIter;
  return p_chunk < P ? p_chunk : P;
}

// The replay and classic kernels' grid: (P chunks, H, batch), so that a CTA finds its chunk, head
// and row without integer divisions by run-time values. With one flat extent those divisions (a
// chain through MUFU.RCP on the uniform datapath) were ~125 of the ~250 SASS instructions between
// a CTA's start and its first global load (sm_90a, nano's batch-1 instance). H200, B = 16, same
// run, flat -> (chunks, H, batch): output-only cycle batch 1 nano 6.22 -> 5.98 us, super 6.34 ->
// 6.08; batch 8-256 level to -3 % (docs/perf-notes.md, Mamba-2 plain decode, "Session 39").
inline dim3 chunk_head_row_grid(int P, int p_chunk, int H, int batch) {
  return dim3(static_cast<unsigned>((P + p_chunk - 1) / p_chunk), static_cast<unsigned>(H), static_cast<unsigned>(batch));
}

// The y and z extents of a grid are at most 65535 (the ops check both with the argument's name).
inline const char* grid_extents_fit(int H, int batch) {
  if (batch > 65535) return "the batch (number of rows) exceeds the CUDA grid limit of 65535";
  if (H > 65535) return "nheads exceeds the CUDA grid limit of 65535";
  return nullptr;
}

// The sizes that set a CTA's shared memory, for allow_dynamic_smem's error: the ring length
// (ring_x's third dimension) and, in the spec verify and the classic step, the token window.
constexpr const char* kRingSmemSizes = "R = %d ring entries (ring_x's third dimension) with P = %d, N = %d";
constexpr const char* kTokensSmemSizes = "max_tokens = %d with P = %d, N = %d";
constexpr const char* kSpecSmemSizes = "R = %d ring entries (ring_x's third dimension) and max_tokens = %d with P = %d, N = %d";

// Whether a decode launch takes the kStreamFirst instance, whose output-only non-flush rows
// stream their state before their entries' terms: output-only launches with an fp32 checkpoint
// (kReplayStreamFirstBuilt) whose CTAs each stream a whole head (p_chunk == P). Where a small
// batch splits P across CTAs (choose_p_chunk), a CTA's stream is one or two iterations, too short
// to hide the entries' staging, and the terms formed after it only lengthen the chain. H200,
// nano / super, B = 16, fp32 checkpoint, bf16 activations, one build, entries first -> stream
// first, non-flush step (us): batch 1 6.60 -> 6.82 / 6.78 -> 6.96; batch 64 75.5 -> 73.0 /
// 83.2 -> 80.9; batch 256 286.4 -> 277.0 / 319.8 -> 311.8; batch 512 572.3 -> 551.3 / 642.3 ->
// 622.4. The state-and-output route and mamba2_flush keep the other instance, whose code holds
// the one order alone. The kStreamFirst instance is compiled for 16-byte aligned state views
// (one 16-byte access per state vector, no run-time test), so a view that is not aligned (a paged
// cache whose base or slot stride is not a multiple of four fp32 values) takes the other instance.
// REPLAYSSM_M2_DECODE_STREAM_FIRST (0 or 1, read at every launch, so both orders compare in one
// process) overrides the choice; 1 with a 2-byte checkpoint, on a launch with no such rows (the
// state-and-output route, mamba2_flush) or on a state view that is not 16-byte aligned is an error.
inline const char* replay_stream_first(const ReplayParams& p, bool built, bool whole_heads, bool* on) {
  const bool output_only = p.mode == ReplayMode::kOutputOnly;
  return env_forced_choice("REPLAYSSM_M2_DECODE_STREAM_FIRST", "REPLAYSSM_M2_DECODE_STREAM_FIRST must be 0 or 1",
                           built && output_only && whole_heads && p.state_vec_aligned, built,
                           output_only && p.state_vec_aligned,
                           "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: the stream-first order is built for an fp32 checkpoint",
                           output_only ? "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: the stream-first order is built for "
                                         "16-byte aligned state views (the state's base and slot stride a multiple "
                                         "of 16 bytes); this view is not"
                                       : "REPLAYSSM_M2_DECODE_STREAM_FIRST=1: only mamba2_decode's output-only route "
                                         "has rows that read the state for its dot products alone (this launch is "
                                         "the state-and-output route or mamba2_flush)",
                           on);
}

// Whether a decode launch takes the tensor-core rank update (kMmaUpdate, replay_mma.cuh): a
// state-and-output launch (every row forms its state) with the kReplayMma instances (fp32
// checkpoint, bf16 activations, N = 128) on a 16-byte aligned state view, where the ring holds more
// than 16 entries (B >= 16 at T = 1: the update of a full ring is two 16-entry mma steps) or where
// choose_p_chunk splits a head down to one 16-row tile per CTA (p_chunk < P, p_chunk <= 16: batch
// 1-2 of the model geometries, where a CTA's time is its prologue and the update's latency).
// H200, state-and-output cycle, us, CUDA cores -> tensor cores (bench/results/h200-2026-12-03-s36-
// decode-mma-vec; calls 2 and 4, one machine, separate processes): B = 16, nano batch 8 20.29 ->
// 19.95, 64 95.23 -> 93.26, 256 368.33 -> 351.33, 512 737.0 -> 716.2; super batch 8 21.06 ->
// 21.01, 256 417.02 -> 395.73; B = 32, nano batch 256 504.88 -> 447.26, super 564.27 -> 483.40;
// batch 1, B = 8 nano 6.54 -> 6.15, super 6.64 -> 6.22. At B = 8 (ring 9: a full ring is one
// half-empty mma step against at most 9 FFMA per element) the CUDA cores win once a CTA holds
// whole heads: nano batch 64 85.92 -> 94.41, 256 336.09 -> 352.97, super 256 374.96 -> 393.08.
// Rings of 10-16 entries were not measured; they keep the CUDA cores with B = 8's. The flush
// step alone is 2.5-4.7 % slower on the tensor cores at B = 16 with whole heads (nano batch 256
// 628.7 -> 658.0), faster at B = 32; the cycles above include it.
// REPLAYSSM_M2_DECODE_MMA (0 or 1, read at every launch, so both updates compare in one process)
// overrides the choice; 1 where the update is not built, on another launch or on a state view that
// is not aligned is an error.
inline const char* replay_mma_choice(const ReplayParams& p, bool built, int p_chunk, bool* on) {
  const bool pays = p.ring_len > 16 || (p_chunk < p.geo.P && p_chunk <= kMmaTileRows);
  const bool state_and_output = p.mode == ReplayMode::kStateAndOutput;
  return env_forced_choice("REPLAYSSM_M2_DECODE_MMA", "REPLAYSSM_M2_DECODE_MMA must be 0 or 1",
                           built && state_and_output && p.state_vec_aligned && pays, built,
                           state_and_output && p.state_vec_aligned,
                           "REPLAYSSM_M2_DECODE_MMA=1: the tensor-core update is built for an fp32 checkpoint, bf16 "
                           "activations and dstate 128",
                           state_and_output ? "REPLAYSSM_M2_DECODE_MMA=1: the tensor-core update is built for 16-byte "
                                              "aligned state views (the state's base and slot stride a multiple of 16 "
                                              "bytes); this view is not"
                                            : "REPLAYSSM_M2_DECODE_MMA=1: only mamba2_decode's state-and-output route "
                                              "takes the tensor-core update (this launch is the output-only route or "
                                              "mamba2_flush)",
                           on);
}

// Whether a tensor-core update launch (replay_mma_choice) takes the instance bounded for nine CTAs
// per SM (kNineCtas: 56 registers against 63, the dot products over the staged x_j): on sm_90
// devices where nine of its CTAs fit by shared memory (nano and super at B = 16 and the small
// batches that split P; with whole heads at B = 32 nano fits five, super six).
// H100, state-and-output cycle, tree / main, nine-CTA bound everywhere (bench/results/h100-2026-12-
// 07-s63): B = 16, batch 256 nano 0.988 (96 SMs 0.986, 80 SMs 0.988-0.997), super 0.996 (96 SMs
// 0.991), batch 1 level (flush step 0.94); B = 32, where the bound only takes registers, 0.996-1.023
// on all SMs and 1.016-1.037 at 80 / 96. sm_100a spills at nine (24 / 24 bytes of stores / loads
// since session 66, 48 / 32 before) and was not measured, so B200 keeps eight.
// REPLAYSSM_M2_DECODE_MMA_NINE (0 or 1, read at every launch) overrides the rule; 1 on a launch
// without the tensor-core update is an error.
inline const char* replay_mma_nine_choice(bool mma, int nine_smem_floats, bool* on) {
  return env_forced_choice(
      "REPLAYSSM_M2_DECODE_MMA_NINE", "REPLAYSSM_M2_DECODE_MMA_NINE must be 0 or 1",
      mma && device_cc_major() == 9 && smem_ctas_per_sm(nine_smem_floats * 4) >= kReplayMmaNineCtas, true, mma,
      nullptr,
      "REPLAYSSM_M2_DECODE_MMA_NINE=1: the nine-CTA bound is built for the tensor-core update only (the state-and-"
      "output route with an fp32 checkpoint, bf16 activations, dstate 128 and a 16-byte aligned state view); this "
      "launch does not take it",
      on);
}

// Whether an output-only decode launch takes the warp-rows kernel (warp_rows.cuh), whose warps
// form their rows' outputs from registers, with their ring positions requested beside the cursors
// and one barrier, and whose flushing rows fold there too: launches whose batch is small enough
// that choose_p_chunk splits each head into chunks of at most kWarps * 4 rows (batch 1-2 of the
// model geometries), with an fp32 checkpoint on a 16-byte aligned view, dstate 128, a ring of at
// most 31 entries (B <= 30) and 16-byte aligned entries. Where the head is not split (p_chunk ==
// P) the stream-first rule applies instead, and a forced stream-first order
// (REPLAYSSM_M2_DECODE_STREAM_FIRST=1) keeps the rule from taking this kernel.
// REPLAYSSM_M2_DECODE_WARP_ROWS (0 or 1, read at every launch, so both kernels compare in one
// process) overrides the rule; 1 where the kernel is not built or the launch does not fit it is
// an error, and so is 1 beside a forced stream-first order.
inline const char* replay_warp_rows_choice(const ReplayParams& p, bool built, int p_chunk, bool* on) {
  constexpr const char* kVar = "REPLAYSSM_M2_DECODE_WARP_ROWS";
  int32_t stream_first_forced = -1;
  if (const char* err = env_count_override("REPLAYSSM_M2_DECODE_STREAM_FIRST", 1,
                                           "REPLAYSSM_M2_DECODE_STREAM_FIRST must be 0 or 1", &stream_first_forced))
    return err;
  const bool output_only = p.mode == ReplayMode::kOutputOnly;
  const bool fits = output_only && p.state_vec_aligned && p.entries_vec_aligned && p.ring_len <= kWarpRowsMaxRing &&
                    p_chunk <= kWarps * RowsCta::kRowsPerWarp;
  const bool rule = built && fits && p_chunk < p.geo.P && stream_first_forced != 1;
  if (const char* err = env_forced_choice(
          kVar, "REPLAYSSM_M2_DECODE_WARP_ROWS must be 0 or 1", rule, built, fits,
          "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel is built for an fp32 checkpoint and dstate 128",
          "REPLAYSSM_M2_DECODE_WARP_ROWS=1: the warp-rows kernel runs mamba2_decode's output-only route on a "
          "16-byte aligned state view and 16-byte aligned entries, with a ring of at most 31 entries and heads "
          "split into chunks of at most 16 rows (small batches); this launch is not one",
          on))
    return err;
  if (*on && stream_first_forced == 1)
    return "REPLAYSSM_M2_DECODE_WARP_ROWS=1 and REPLAYSSM_M2_DECODE_STREAM_FIRST=1 select two kernels for one "
           "launch: set at most one of them to 1";
  return nullptr;
}

template <typename Act, typename St, int N>
const char* launch_replay_typed(const ReplayParams& p, cudaStream_t stream) {
  constexpr int kRows = rows_per_iteration<St, N, kWarps>();
  const int64_t heads_total = static_cast<int64_t>(p.batch) * p.geo.H;
  const int p_chunk = choose_p_chunk<kRows>(p.geo.P, heads_total);
  const dim3 grid = chunk_head_row_grid(p.geo.P, p_chunk, p.geo.H, p.batch);
  bool stream_first = false;
  if (const char* err = replay_stream_first(p, kReplayStreamFirstBuilt<St>, p_chunk == p.geo.P, &stream_first))
    return err;
  bool warp_rows = false;
  if (const char* err = replay_warp_rows_choice(p, kRowsCtaBuilt<St, N>, p_chunk, &warp_rows)) return err;
  if (warp_rows) stream_first = false;  // the stream-first rule, not forced (replay_warp_rows_choice)
  constexpr bool kMmaBuilt = kReplayMma<Act, St, N, kWarps>;
  bool mma = false;
  if (const char* err = replay_mma_choice(p, kMmaBuilt, p_chunk, &mma)) return err;
  bool nine = false;
  if (const char* err = replay_mma_nine_choice(
          mma, ReplaySmem(p.ring_len, p_chunk, N, sizeof(Act), false, kRows, kWarps, true).total, &nine))
    return err;
  if (const char* err = grid_extents_fit(p.geo.H, p.batch)) return err;
  if (heads_total == 0) return nullptr;
  if constexpr (kRowsCtaBuilt<St, N>) {
    if (warp_rows)  // its shared memory is static (warp_rows.cuh)
      return launch_kernel(EarlyLaunch::kYes, mamba2_decode_rows_kernel<Act, kWarps>, grid, dim3(kWarps * 32), 0, stream,
                           p, p_chunk);
  }
  const bool b_copy = !mma && replay_b_copy(p.ring_len, p_chunk, N, sizeof(Act), kRows);
  const size_t smem =
      static_cast<size_t>(ReplaySmem(p.ring_len, p_chunk, N, sizeof(Act), b_copy, kRows, mma ? kWarps : 0, nine).total) *
      sizeof(float);
  // fp32 activations never take the copy (replay_b_copy): that instance is not built.
  constexpr bool kCopyPossible = sizeof(Act) != 4;
  auto kernel = b_copy ? mamba2_replay_kernel<Act, St, N, kWarps, kCopyPossible, false, false>
                       : mamba2_replay_kernel<Act, St, N, kWarps, false, false, false>;
  // With an fp32 checkpoint every launch on an aligned view takes an aligned-view instance (the
  // state-and-output route, flushes, mamba2_flush, the small batches that split P): without the
  // alignment test beside each state access the state-and-output cycle runs 2.5-5 % faster (nano
  // batch 256 411.0 -> 393.4 us, session 25; docs/perf-notes.md, Mamba-2 plain decode).
  if constexpr (kReplayStreamFirstBuilt<St>) {
    if (stream_first)
      kernel = b_copy ? mamba2_replay_kernel<Act, St, N, kWarps, kCopyPossible, true, true>
                      : mamba2_replay_kernel<Act, St, N, kWarps, false, true, true>;
    else if (p.state_vec_aligned)
      kernel = b_copy ? mamba2_replay_kernel<Act, St, N, kWarps, kCopyPossible, false, true>
                      : mamba2_replay_kernel<Act, St, N, kWarps, false, false, true>;
  }
  if constexpr (kMmaBuilt) {
    if (mma)
      kernel = nine ? mamba2_replay_kernel<Act, St, N, kWarps, false, false, true, true, true>
                    : mamba2_replay_kernel<Act, St, N, kWarps, false, false, true, true>;
  }
  if (const char* err = allow_dynamic_smem(kernel, smem, kRingSmemSizes, p.ring_len, p.geo.P, N)) return err;
  return launch_kernel(EarlyLaunch::kYes, kernel, grid, dim3(kWarps * 32), smem, stream, p, p_chunk);
}

// Whether a classic-step launch takes the rows kernel (state_update_rows.cuh: no shared memory, no
// barrier): the plain form (one token per row) with an fp32 state on a 16-byte aligned view and
// dstate 128, where choose_p_chunk splits each head into chunks of at most kWarps * 4 rows (batch
// 1-2 of the model geometries). REPLAYSSM_M2_UPDATE_ROWS (0 or 1, read at every launch, so both
// kernels compare in one process) overrides the rule; 1 where the kernel is not built or the
// launch does not fit it is an error.
inline const char* update_rows_choice(const StateUpdateParams& p, bool built, int p_chunk, bool* on) {
  const bool fits = p.cu_seqlens == nullptr && p.state_vec_aligned && p_chunk <= kWarps * RowsCta::kRowsPerWarp;
  return env_forced_choice("REPLAYSSM_M2_UPDATE_ROWS", "REPLAYSSM_M2_UPDATE_ROWS must be 0 or 1",
                           built && fits && p_chunk < p.geo.P, built, fits,
                           "REPLAYSSM_M2_UPDATE_ROWS=1: the rows kernel is built for an fp32 state and dstate 128",
                           "REPLAYSSM_M2_UPDATE_ROWS=1: the rows kernel runs the plain form (one token per row) on a "
                           "16-byte aligned state view with heads split into chunks of at most 16 rows (small "
                           "batches); this launch is not one",
                           on);
}

template <typename Act, typename St, int N>
const char* launch_state_update_typed(const StateUpdateParams& p, cudaStream_t stream) {
  constexpr int kRows = rows_per_iteration<St, N, kWarps>();
  const int64_t heads_total = static_cast<int64_t>(p.batch) * p.geo.H;
  const int p_chunk = choose_p_chunk<kRows>(p.geo.P, heads_total);
  if (const char* err = grid_extents_fit(p.geo.H, p.batch)) return err;
  bool rows = false;
  if (const char* err = update_rows_choice(p, kRowsCtaBuilt<St, N>, p_chunk, &rows)) return err;
  if (heads_total == 0) return nullptr;
  if constexpr (kRowsCtaBuilt<St, N>) {
    if (rows)
      return launch_kernel(EarlyLaunch::kYes, mamba2_state_update_rows_kernel<Act, kWarps>,
                           chunk_head_row_grid(p.geo.P, p_chunk, p.geo.H, p.batch), dim3(kWarps * 32), 0, stream, p,
                           p_chunk);
  }
  const size_t smem = static_cast<size_t>(StateUpdateSmem(p.max_tokens, p_chunk, N).total) * sizeof(float);
  auto kernel = mamba2_state_update_kernel<Act, St, N, kWarps>;
  if (const char* err = allow_dynamic_smem(kernel, smem, kTokensSmemSizes, p.max_tokens, p.geo.P, N)) return err;
  // The snapshot form (the per-draft baseline) launches without overlap: dependent_launch.cuh.
  const EarlyLaunch early = p.snapshot_slots == nullptr ? EarlyLaunch::kYes : EarlyLaunch::kNo;
  return launch_kernel(early, kernel, chunk_head_row_grid(p.geo.P, p_chunk, p.geo.H, p.batch), dim3(kWarps * 32), smem,
                       stream, p, p_chunk);
}

// Whether a spec launch takes the tensor-core stream (spec_mma.cuh): the kSpecMma instances
// (`built`) where P is whole 16-row tiles and the state view is 16-byte aligned. The environment
// variable REPLAYSSM_M2_SPEC_MMA (read at every launch, so both streams can be compared in one
// process) forces the CUDA cores with 0, and with 1 the tensor cores, an error where they cannot run.
inline const char* spec_mma_choice(const ReplayParams& p, bool built, bool* mma) {
  const bool fits = p.geo.P % kSpecMmaTileRows == 0 && p.state_vec_aligned;
  return env_forced_choice("REPLAYSSM_M2_SPEC_MMA", "REPLAYSSM_M2_SPEC_MMA must be 0 or 1", built && fits, built, fits,
                           "REPLAYSSM_M2_SPEC_MMA=1: the tensor-core stream is built for an fp32 checkpoint, bf16 "
                           "activations, windows of 5 to 8 tokens and dstate a multiple of 32",
                           "REPLAYSSM_M2_SPEC_MMA=1: the tensor-core stream needs headdim P a multiple of 16 and a "
                           "16-byte aligned state view",
                           mma);
}

// Iterations of the CUDA-core state stream asked of L2 ahead of its loads (l2_lead_iters; the
// tensor-core stream has its own per-tile prefetch, SpecMmaStream::prefetch_tile). The stream
// keeps one iteration's loads in flight (8 KB per CTA for an fp32 state at N = 128), and at serving
// batch a CTA streams 10-20 iterations after a prologue with nothing else in flight. H200, B = 16,
// all accepted, fp32 checkpoint, bf16 activations, one build, lead 0 -> 2 (us): batch 256 nano
// T = 2 359.2 -> 337.5, T = 4 436.2 -> 430.5, super T = 2 384.7 -> 370.5, T = 4 481.9 -> 469.5;
// batch 512 nano T = 4 860.8 -> 847.5, super 953.2 -> 926.4. Leads 1 and 4 gained less. It does
// not pay with fewer CTAs in flight (batch 64, 3.9 waves of nano's pair CTAs at 6 per SM: T = 4
// 115.6 -> 118.1; super, 5.2 waves: level) nor with a 2-byte checkpoint (batch 256 T = 4 nano
// 414.7 -> 420.4, super 466.9 -> 470.8; T <= 2 about 1 % faster): lead 2 from 8 waves of CTAs on,
// fp32 checkpoints only. This rule against lead 0, same build: nano batch 256 T = 1 325.3 -> 312.0,
// batch 512 T = 2 699.4 -> 654.3; super batch 128 (10.3 waves) T = 4 247.0 -> 241.9; with fp16
// activations (the CUDA-core stream at every T) nano batch 256 T = 4 431.0 -> 424.1, T = 8 751.2 ->
// 722.8. Below the threshold, forced to lead 2: nano batch 128 (7.8 waves) level at T = 1 and 1 %
// faster at T = 4 (224.5 -> 222.5); batch 64 as above (T = 2 96.4 -> 95.8, T = 4 slower); batch 96
// not timed with the lead. REPLAYSSM_M2_SPEC_L2 (0 to 8, read at every launch) overrides it for
// measurements; any other value raises, and so does a lead on the tensor-core stream.
inline const char* spec_l2_lead(bool mma, int state_bytes, int64_t ctas, int min_ctas, int32_t* lead) {
  constexpr int kLeadWaves = 8;
  *lead = !mma && state_bytes == 4 && ctas >= static_cast<int64_t>(kLeadWaves) * min_ctas * num_sms() ? 2 : 0;
  if (const char* err = env_count_override("REPLAYSSM_M2_SPEC_L2", 8,
                                            "REPLAYSSM_M2_SPEC_L2 must be a count of iterations from 0 to 8", lead))
    return err;
  if (mma && *lead > 0)
    return "REPLAYSSM_M2_SPEC_L2 sets the CUDA-core state stream's lead: the tensor-core stream (see "
           "REPLAYSSM_M2_SPEC_MMA) prefetches its own tiles";
  return nullptr;
}

// Whether a launch takes the CUDA-core stream compiled for 16-byte aligned state views (kVecStream,
// built where kSpecVecStream): on every aligned view off the tensor cores, at every batch. H200,
// B = 16, T = 4, fp32 checkpoint, bf16, one build, the instance forced off / on (session 16, with the
// presorted token sums; processes alternating): nano 8.70 / 8.65 us at batch 1, 24.05 / 23.78 at 8,
// 61.3 / 60.5 at 32, 114.9 / 112.6 at 64, 425.7 / 412.6 at 256, 835.4 / 809.4 at 512; super 8.76 /
// 8.72, 26.4 / 26.2, 67.0 / 67.0, 127.4 / 126.0, 457.3 / 452.3, 899.9 / 889.6. No batch was slower.
// REPLAYSSM_M2_SPEC_VEC (0 or 1, read at every launch) overrides it; 1 where the stream cannot run,
// or any other value, raises.
inline const char* spec_vec_stream(bool built, bool mma, bool aligned, bool* vec) {
  return env_forced_choice("REPLAYSSM_M2_SPEC_VEC", "REPLAYSSM_M2_SPEC_VEC must be 0 or 1", built && !mma && aligned,
                           built && !mma, aligned,
                           "REPLAYSSM_M2_SPEC_VEC=1: the aligned-view stream is built for an fp32 checkpoint at "
                           "windows of 3 or 4 tokens on the CUDA cores, not for fp32 activations at dstate 64 or less",
                           "REPLAYSSM_M2_SPEC_VEC=1: the aligned-view stream needs a 16-byte aligned state view (base "
                           "and slot stride)",
                           vec);
}

// The rows of P one spec CTA streams (p_chunk) and the heads it takes, for one state stream.
struct SpecTiling {
  int p_chunk;
  int heads;
};

// Heads per spec CTA (heads_per_cta) for the CUDA-core or the tensor-core stream. The heads of a
// group share the B staging, the C loads and the B . C products. Pairs, H200, batch 256, B = 16,
// T = 4, same run: nano 452.7 -> 427.9 us, super 525.1 -> 475.0; from two full waves of pair CTAs
// on. A pair's smem is counted without the fold's B copy. Four heads (tensor-core stream only,
// heads per group a multiple of 4) pay the CTA prologue (weights, B . C, the C fragments: ~40 % of
// the stream's warp stall samples at T = 8) once per four heads. H200, B = 16, all accepted, same
// build, pairs -> quads: batch 256 nano T = 8 579.5 -> 558.7 us, T = 5 515.5 -> 476.1, super T = 8
// 623.9 -> 588.7; smaller batches, nano T = 8: batch 64 (2.3 waves of quad CTAs) 155.2 -> 165.4,
// 96 (3.5 waves) 224.5 -> 224.7, 128 (4.7 waves) 300.2 -> 287.8; super T = 8: 64 (3.1 waves)
// 167.2 -> 166.0, 96 (4.7) 241.7 -> 232.3: from three full waves of quad CTAs on.
template <typename Act, typename St, int N, int kT>
const char* spec_tiling(const ReplayParams& p, bool mma, SpecTiling* t) {
  constexpr int kRows = spec_rows_per_iteration<St, N, kWarps, kT>();
  const int64_t heads_total = static_cast<int64_t>(p.batch) * p.geo.H;
  const int heads_per_group = p.geo.H / p.geo.G;
  t->p_chunk = mma ? choose_p_chunk<kSpecMmaTileRows>(p.geo.P, heads_total) : choose_p_chunk<kRows>(p.geo.P, heads_total);
  constexpr int min_ctas = spec_min_ctas<kT>();
  constexpr bool kPadFold = kSpecFoldPadded<Act, St, N, kT>;
  HeadPairing pairing{"REPLAYSSM_M2_SPEC_HEADS",
                      "REPLAYSSM_M2_SPEC_HEADS must be 1, 2 or 4",
                      "REPLAYSSM_M2_SPEC_HEADS=2 needs an even number of heads per group (nheads / ngroups)",
                      heads_per_group % 2 == 0,
                      t->p_chunk == p.geo.P,
                      heads_total / 2,
                      min_ctas,
                      2 * min_ctas};
  pairing.quads_built = true;
  pairing.err_quads = !mma ? "REPLAYSSM_M2_SPEC_HEADS=4 runs on the tensor-core state stream only (see "
                             "REPLAYSSM_M2_SPEC_MMA)"
                      : heads_per_group % 4 != 0
                          ? "REPLAYSSM_M2_SPEC_HEADS=4 needs a number of heads per group (nheads / ngroups) divisible by 4"
                          : nullptr;
  pairing.min_quad_ctas_per_sm = 3 * min_ctas;
  if (const char* err = heads_per_cta(
          pairing,
          [&](int h) { return SpecSmem(p.ring_len, t->p_chunk, N, kT, sizeof(Act), false, h, kRows, mma, kPadFold).total * 4; },
          &t->heads))
    return err;
  if (t->heads > 1) t->p_chunk = p.geo.P;  // whole heads
  return nullptr;
}

template <typename Act, typename St, int N, int kT>
const char* launch_spec_verify_typed(const SpecVerifyParams& sp, cudaStream_t stream) {
  const ReplayParams& p = sp.replay;
  constexpr bool kMmaBuilt = kSpecMma<Act, St, N, kT>;
  const int64_t heads_total = static_cast<int64_t>(p.batch) * p.geo.H;
  if (heads_total == 0) return nullptr;
  // Grid (P chunks, H / heads, batch): the kernel reads its indices without dividing.
  if (const char* err = grid_extents_fit(p.geo.H, p.batch)) return err;
  bool mma = false;
  if (const char* err = spec_mma_choice(p, kMmaBuilt, &mma)) return err;
  SpecTiling tiling{};
  if (const char* err = spec_tiling<Act, St, N, kT>(p, mma, &tiling)) return err;
  const int p_chunk = tiling.p_chunk, heads = tiling.heads;
  const dim3 grid(static_cast<unsigned>((p.geo.P + p_chunk - 1) / p_chunk), static_cast<unsigned>(p.geo.H / heads),
                  static_cast<unsigned>(p.batch));
  SpecVerifyParams launch_params = sp;
  const int64_t ctas = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  if (const char* err = spec_l2_lead(mma, sizeof(St), ctas, spec_min_ctas<kT>(), &launch_params.l2_lead_iters))
    return err;
  constexpr bool kVecBuilt = kSpecVecStream<Act, St, N, kT>;
  bool vec = false;
  if (const char* err = spec_vec_stream(kVecBuilt, mma, p.state_vec_aligned, &vec))
    return err;
  constexpr int kRows = spec_rows_per_iteration<St, N, kWarps, kT>();
  constexpr bool kPadFold = kSpecFoldPadded<Act, St, N, kT>;
  const bool b_copy = !mma && spec_b_copy<kT>(p.ring_len, p_chunk, N, sizeof(Act), heads, kRows, kPadFold);
  const size_t smem =
      static_cast<size_t>(SpecSmem(p.ring_len, p_chunk, N, kT, sizeof(Act), b_copy, heads, kRows, mma, kPadFold).total) *
      sizeof(float);
  constexpr bool kCopyPossible = sizeof(Act) != 4;  // as for the replay kernel
  // The CUDA-core instance for the tiling, with (std::true_type) or without the aligned-view stream.
  auto cuda_core_kernel = [&](auto vec_stream) {
    constexpr bool kVec = decltype(vec_stream)::value;
    return heads == 2 ? (b_copy ? mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, kCopyPossible, 2, false, kVec>
                                : mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, false, 2, false, kVec>)
                      : (b_copy ? mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, kCopyPossible, 1, false, kVec>
                                : mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, false, 1, false, kVec>);
  };
  auto kernel = cuda_core_kernel(std::false_type{});
  if constexpr (kVecBuilt) {
    if (vec) kernel = cuda_core_kernel(std::true_type{});
  }
  if constexpr (kMmaBuilt) {
    if (mma)
      kernel = heads == 4   ? mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, false, 4, true>
               : heads == 2 ? mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, false, 2, true>
                            : mamba2_spec_verify_kernel<Act, St, N, kWarps, kT, false, 1, true>;
  }
  if (const char* err_smem = allow_dynamic_smem(kernel, smem, kSpecSmemSizes, p.ring_len, sp.max_tokens, p.geo.P, N))
    return err_smem;
  // Batch 1 launches without overlap (dependent_launch.cuh).
  const EarlyLaunch early = p.batch > 1 ? EarlyLaunch::kYes : EarlyLaunch::kNo;
  return launch_kernel(early, kernel, grid, dim3(kWarps * 32), smem, stream, launch_params, p_chunk);
}

constexpr const char* kBadDstate = "dstate N must be 8, 16, 32, 64, 128 or 256 for the CUDA kernels";
constexpr const char* kBadDtype = "unsupported activation dtype";

template <typename Act, typename St>
const char* replay_by_dstate(const ReplayParams& p, cudaStream_t s) {
  switch (p.geo.N) {
    case 8: return launch_replay_typed<Act, St, 8>(p, s);
    case 16: return launch_replay_typed<Act, St, 16>(p, s);
    case 32: return launch_replay_typed<Act, St, 32>(p, s);
    case 64: return launch_replay_typed<Act, St, 64>(p, s);
    case 128: return launch_replay_typed<Act, St, 128>(p, s);
    case 256: return launch_replay_typed<Act, St, 256>(p, s);
    default: return kBadDstate;
  }
}

template <typename Act, typename St, int kT>
const char* spec_verify_by_dstate(const SpecVerifyParams& p, cudaStream_t s) {
  switch (p.replay.geo.N) {
    case 8: return launch_spec_verify_typed<Act, St, 8, kT>(p, s);
    case 16: return launch_spec_verify_typed<Act, St, 16, kT>(p, s);
    case 32: return launch_spec_verify_typed<Act, St, 32, kT>(p, s);
    case 64: return launch_spec_verify_typed<Act, St, 64, kT>(p, s);
    case 128: return launch_spec_verify_typed<Act, St, 128, kT>(p, s);
    case 256: return launch_spec_verify_typed<Act, St, 256, kT>(p, s);
    default: return kBadDstate;
  }
}

template <typename Act, typename St>
const char* state_update_by_dstate(const StateUpdateParams& p, cudaStream_t s) {
  switch (p.geo.N) {
    case 8: return launch_state_update_typed<Act, St, 8>(p, s);
    case 16: return launch_state_update_typed<Act, St, 16>(p, s);
    case 32: return launch_state_update_typed<Act, St, 32>(p, s);
    case 64: return launch_state_update_typed<Act, St, 64>(p, s);
    case 128: return launch_state_update_typed<Act, St, 128>(p, s);
    case 256: return launch_state_update_typed<Act, St, 256>(p, s);
    default: return kBadDstate;
  }
}

}  // namespace detail

template <typename St>
const char* launch_replay_for_state(const ReplayParams& p, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.act) {
    case DType::kFloat32: return detail::replay_by_dstate<float, St>(p, s);
    case DType::kBFloat16: return detail::replay_by_dstate<__nv_bfloat16, St>(p, s);
    case DType::kFloat16: return detail::replay_by_dstate<__half, St>(p, s);
  }
  return detail::kBadDtype;
}

template <typename St>
const char* launch_state_update_for_state(const StateUpdateParams& p, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.act) {
    case DType::kFloat32: return detail::state_update_by_dstate<float, St>(p, s);
    case DType::kBFloat16: return detail::state_update_by_dstate<__nv_bfloat16, St>(p, s);
    case DType::kFloat16: return detail::state_update_by_dstate<__half, St>(p, s);
  }
  return detail::kBadDtype;
}

// The spec kernels for one state dtype and one window tile kT (the smallest power of two >= T),
// every activation dtype and dstate.
template <typename St, int kT>
const char* launch_spec_verify_for_state(const SpecVerifyParams& p, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.replay.act) {
    case DType::kFloat32: return detail::spec_verify_by_dstate<float, St, kT>(p, s);
    case DType::kBFloat16: return detail::spec_verify_by_dstate<__nv_bfloat16, St, kT>(p, s);
    case DType::kFloat16: return detail::spec_verify_by_dstate<__half, St, kT>(p, s);
  }
  return detail::kBadDtype;
}

}  // namespace replayssm::mamba2
