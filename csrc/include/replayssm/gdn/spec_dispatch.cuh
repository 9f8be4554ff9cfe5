// Launch configuration and the dtype / K dispatch of the GDN window kernel (spec verify and the
// snapshot state update). Included by the instantiation files csrc/kernels/gdn_spec_*.cu, each of
// which instantiates one (mode, state dtype) slice so the slices compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/common/heads_per_cta.cuh"
#include "replayssm/gdn/dispatch.cuh"
#include "replayssm/gdn/params.h"
#include "replayssm/gdn/spec_kernel.cuh"

namespace replayssm::gdn {

// Whether a spec launch streams the state through registers (window_stream.cuh) rather than
// through the cp.async stage buffers: wherever it is built (`built`: kWindowRegStreamBuilt, the
// 8-token tile), the CTA's rows fit its tiles (`fits`: window_reg_stream_fits) and every warp of
// the CTA holds a 16-row tile (`every_warp`). The stream gives each warp whole tiles, so a CTA of
// fewer rows leaves warps idle, where the stage buffers spread the rows over all of them: at batch 1
// (16-row CTAs for Qwen3.5-4B) registers ran T = 8 11.86 -> 13.05 us and Qwen3.5-122B 14.19 ->
// 14.95 (H200, B = 16, same run, session 18). REPLAYSSM_GDN_SPEC_REGS (read at every spec launch,
// so both streams can be compared in one process) forces the stage buffers with 0, and with 1 the
// register stream, an error where it cannot run. The snapshot form of the state update (the spec
// baseline) does not read it.
inline const char* window_reg_stream(bool built, bool fits, bool every_warp, bool* regs) {
  return env_forced_choice("REPLAYSSM_GDN_SPEC_REGS", "REPLAYSSM_GDN_SPEC_REGS must be 0 or 1",
                           built && fits && every_warp, built, fits,
                           "REPLAYSSM_GDN_SPEC_REGS=1: the register stream is built for an fp32 checkpoint, bf16 "
                           "activations and windows of 5 to 8 tokens",
                           "REPLAYSSM_GDN_SPEC_REGS=1: the register stream needs the rows of each CTA in whole "
                           "8-row pieces",
                           regs);
}

// The CTAs per SM the register stream's instance is bounded for. The launcher's choice:
// kWindowRegAltCtas (96 registers) once the grid needs more than kRegAltMinWaves waves of
// kWindowMinCtas CTAs per SM, else kWindowMinCtas (128 registers). More resident warps hide more of
// the stream's own dependency chains (3 % more CTAs per us over many waves); on a grid that fits in
// as many waves either way, the 96-register instance's spills cost more than it hides. H200, T = 8,
// B = 16, all accepted, same run (session 20), 4 -> 5 CTAs per SM (us, waves of 4 per SM):
// Qwen3.5-4B batch 64 (3.9) 111.1 -> 116.3, batch 72 (4.4) 129.8 -> 126.7, batch 80 (4.8) 136.6 ->
// 133.4, batch 256 (15.5) 405.1 -> 392.4; Qwen3.5-122B batch 32 (3.9) 110.4 -> 114.5, batch 40
// (4.8) 135.6 -> 131.2, batch 256 776.8 -> 747.8; batch 8 and below lost 0.4-5 %. With the
// benchmark's realistic acceptance (mean2.5) the gain holds only at 4-6 waves (4B batch 80 121.1 ->
// 119.3) and turns into a 1-2.4 % loss from about 10 waves on at T = 8 (4B batch 256 347.5 ->
// 351.9, batch 512 676.5 -> 688.5), while at T = 6 it gains or is level (4B batch 96 138.3 ->
// 135.8, batch 512 668.3 -> 670.4). A 4-8 wave bound would give back 3-6 % all accepted to save
// at most 2 % there, so the rule holds at every acceptance; docs/perf-notes.md, GDN spec verify,
// "Session 20" and "Session 21".
// REPLAYSSM_GDN_SPEC_REG_CTAS (4 or 5, read at every spec launch, so both compare in one process)
// overrides it; any other value, or the variable set for a launch that does not take the register
// stream, is an error.
constexpr int kRegAltMinWaves = 4;
inline const char* window_reg_ctas(bool regs, int64_t ctas, int* reg_ctas) {
  constexpr const char* kValue = "REPLAYSSM_GDN_SPEC_REG_CTAS must be 4 or 5 (CTAs per SM of the register stream)";
  const int64_t alt_from = static_cast<int64_t>(kRegAltMinWaves) * kWindowMinCtas * num_sms();
  *reg_ctas = regs && ctas > alt_from ? kWindowRegAltCtas : kWindowMinCtas;
  int forced = -1;
  if (const char* err = env_count_override("REPLAYSSM_GDN_SPEC_REG_CTAS", kWindowRegAltCtas, kValue, &forced)) return err;
  if (forced < 0) return nullptr;
  if (forced != kWindowMinCtas && forced != kWindowRegAltCtas) return kValue;
  if (!regs)
    return "REPLAYSSM_GDN_SPEC_REG_CTAS: this launch takes the stage buffers, not the register stream (it needs an "
           "fp32 checkpoint, bf16 activations, windows of 5 to 8 tokens and CTAs of at least 64 rows, or "
           "REPLAYSSM_GDN_SPEC_REGS=1)";
  *reg_ctas = forced;
  return nullptr;
}

// Whether a CTA of tile_rows rows (one v-head) can take the register stream: the fold's ldmatrix
// rows of the staged ring u ([j][tile_rows] bf16) stay 16-byte aligned.
inline bool window_reg_stream_fits(int tile_rows) { return tile_rows % 8 == 0; }

template <WindowMode WM>
struct WindowLauncher {
  template <int kT, int K, typename ST, typename AT>
  static const char* launch(const GdnParams& p_in, cudaStream_t stream) {
    GdnParams p = p_in;
    constexpr int kRowsPerWarp = 32 / (K / 16);
    constexpr bool kSpec = WM == WindowMode::kSpecVerify;
    constexpr bool kTensorCores = kWindowTensorCores<WM, kT, ST, AT>;
    constexpr bool kRegBuilt = kWindowRegStreamBuilt<kSpec, kT, ST, AT>;
    const int T = kSpec ? kT : p.max_tokens;
    auto smem_bytes = [&](int tile_rows, int heads, bool regs) {
      const int stages =
          heads == 2 ? window_stages<2, kT, K, ST, kTensorCores>() : window_stages<1, kT, K, ST, kTensorCores>();
      return window_smem(kSpec, kTensorCores, p.ring_len, T, tile_rows, K, static_cast<int>(sizeof(ST)),
                         static_cast<int>(sizeof(AT)), heads, stages, regs, kWindowMmaFoldOnly<WM, kT, ST, AT>)
                 .total *
             static_cast<int>(sizeof(float));
    };
    // Tiles per v-head: pick_tiles, or for spec launches REPLAYSSM_GDN_SPEC_TILES (read at every
    // launch, so tilings compare in one process): a count from 1 to 8 that splits V into whole row
    // groups of every warp, else an error. pick_tiles aims at about two CTAs per SM, a small batch
    // splitting each head along V, but where the 8-token register stream is built at about one:
    // each tile repeats the window's prologue (q̂ / k̂, their products, the history's) for fewer
    // rows, and only 64-row tiles and larger give every warp of the register stream a tile
    // (window_reg_stream). H200, B = 16, all accepted, same run (session 19), T = 8, two CTAs per SM
    // -> one (forced tiles, us): Qwen3.5-4B batch 2 14.32 -> 13.49, batch 4 17.20 -> 16.51, batch 8
    // 22.71 -> 21.80; Qwen3.5-122B batch 1 14.37 -> 13.46, batch 2 16.97 -> 16.24, batch 4 22.49 ->
    // 21.54; Qwen3.5-4B batch 1 kept 8 tiles (4: 11.90 -> 12.23). At T = 2 and 4 halving the tiles
    // gained at most 3 % (batch 2-4) and lost up to 5 % elsewhere.
    constexpr int kCtasPerSm = kRegBuilt ? 1 : 2;
    int forced_tiles = -1;
    if constexpr (kSpec) {
      constexpr const char* kTilesValue = "REPLAYSSM_GDN_SPEC_TILES must be a count of tiles per v-head from 1 to 8";
      if (const char* err = env_count_override("REPLAYSSM_GDN_SPEC_TILES", 8, kTilesValue, &forced_tiles)) return err;
      if (forced_tiles == 0) return kTilesValue;
      if (forced_tiles > 0) p.tiles_per_head = forced_tiles;
    }
    int tiles = 0, tile_rows = 0;
    // choose_tiles checks the split; a forced count that fails it is the variable's error.
    if (const char* err = choose_tiles(p, kRowsPerWarp, &tiles, &tile_rows, 1, kCtasPerSm))
      return forced_tiles > 0 ? "REPLAYSSM_GDN_SPEC_TILES must split V into tiles of a multiple of 512 / K rows" : err;
    // V-heads per CTA: pairs of one k-head share q, k, their products and the history's k_j.
    // Spec verify, H200, batch 256, B = 16, one build, one head vs pairs: Qwen3.5-4B T = 2 251.2 ->
    // 234.4 us, T = 1 175.2 -> 177.8; Qwen3.5-122B T = 2 484.8 -> 447.7, T = 1 336.4 -> 328.5.
    // Pairs from 3 pair CTAs per SM on (kPairCtasPerSm), between the two small batches measured
    // (Qwen3.5-4B, one head vs pairs, T = 2 / 4, us): batch 16 (1.9 pair CTAs per SM) 20.6 / 23.4 ->
    // 24.4 / 28.9, batch 32 (3.9 per SM) 37.7 / 42.5 -> 34.2 / 39.6.
    int heads = 1;
    if constexpr (kSpec) {
      constexpr int kPairCtasPerSm = 3;
      constexpr bool kPairsBuilt = kT <= kMaxPairTokens;
      const HeadPairing pairing{
          "REPLAYSSM_GDN_SPEC_HEADS", "REPLAYSSM_GDN_SPEC_HEADS must be 1 or 2",
          "REPLAYSSM_GDN_SPEC_HEADS=2 needs an even number of v-heads per k-head (HV / H)", (p.HV / p.H) % 2 == 0,
          tiles == 1, static_cast<int64_t>(p.batch) * (p.HV / 2), kWindowMinCtas, kPairCtasPerSm,
          kPairsBuilt ? nullptr
                      : "REPLAYSSM_GDN_SPEC_HEADS=2 is built for windows of up to 4 tokens (max_tokens <= 4): "
                        "longer windows fit fewer pair CTAs per SM"};
      if (const char* err = heads_per_cta(pairing, [&](int h) { return smem_bytes(p.V, h, false); }, &heads))
        return err;
      if (heads > 1 && forced_tiles > 1)
        return "REPLAYSSM_GDN_SPEC_TILES above 1 with v-head pairs (REPLAYSSM_GDN_SPEC_HEADS=2): a pair's CTA "
               "takes both heads whole";
      if (heads > 1) tiles = 1, tile_rows = p.V;  // pairs of whole heads
    }
    bool regs = false;
    [[maybe_unused]] int reg_ctas = kWindowMinCtas;
    if constexpr (kSpec) {
      if (const char* err = window_reg_stream(kRegBuilt, window_reg_stream_fits(tile_rows),
                                              tile_rows >= kWarps * kMmaTileRows, &regs))
        return err;
      const int64_t ctas = static_cast<int64_t>(p.batch) * p.HV * tiles;
      if (const char* err = window_reg_ctas(regs, ctas, &reg_ctas)) return err;
    }
    // Stage chunks asked of L2 ahead of their cp.async (l2_lead_chunks). The v-head pairs at the
    // 4-token tile stream through two stage buffers, one chunk in flight per CTA, and the bulk
    // prefetch puts a second one on its way. H200, B = 16, all accepted, one build, lead 0 -> 1,
    // T = 4 (pairs): batch 256 Qwen3.5-4B 273.7 -> 263.4 us, Qwen3.5-122B 525.8 -> 503.5; batch 512
    // 531.0 -> 503.8 and 1031.0 -> 983.4; batch 64 73.2 -> 72.0. Elsewhere it does not pay: with three
    // stages (T = 2, T = 8) lead 1 lost 1-2 % (Qwen3.5-4B batch 256 T = 2 236.2 -> 239.3, T = 8 477.5
    // -> 479.1), and so did the bf16 checkpoint's two-stage T = 8 instance (batch 256 520.1 -> 525.9);
    // leads 2 and 4 lost everywhere. Since then the verify kernel does less per chunk (sessions 31-56:
    // H200 T = 4 263 -> 237 us), and at an H200's bandwidth per SM its T = 4 pairs now gain from a
    // lead of 2 (session 57, an H100 on 96 of its 132 SMs, the benchmark's --sms 96, batch 256:
    // Qwen3.5-4B 309.9 -> 298.1 us, 122B 592.2 -> 570.6; on all 132 SMs 279.9 -> 281.2 and 532.2 ->
    // 534.9, batch 1 / 64 level). So the lead is 2 where each SM has more than an H100 SXM's share of
    // the bandwidth (kLeadTwoGbpsPerSm: the H100's ~25 GB/s per SM keeps 1, the H200's ~37 takes 2;
    // session 64, an H100, this rule against lead 2, batch 256 / 512: Qwen3.5-4B 276.7 -> 275.8 /
    // 534.0 -> 530.5 us, 122B 526.6 -> 524.2 / 1033.5 -> 1024.6; lead 2 against 1 is not measured on
    // an H200).
    // The snapshot baseline's pairs keep 1: lead 2 cost them 1.3 % on both. REPLAYSSM_GDN_L2 (a
    // count of chunks, read at every launch) overrides it for measurements, also on an H100 confined
    // to fewer SMs (--sms), whose launches still read the whole device's SM count; a value that is
    // not a count from 0 to 8 raises.
    constexpr double kLeadTwoGbpsPerSm = 30.0;
    p.l2_lead_chunks = heads == 2 && kT == 4 ? (kSpec && dram_gbps_per_sm() > kLeadTwoGbpsPerSm ? 2 : 1) : 0;
    if (const char* err = env_count_override("REPLAYSSM_GDN_L2", 8,
                                             "REPLAYSSM_GDN_L2 must be a count of chunks from 0 to 8", &p.l2_lead_chunks))
      return err;
    if (regs && p.l2_lead_chunks > 0)
      return "REPLAYSSM_GDN_L2: this launch takes the register stream, which has no stage chunks to lead (force the "
             "stage buffers with REPLAYSSM_GDN_SPEC_REGS=0, or set REPLAYSSM_GDN_L2=0)";
    const size_t bytes = static_cast<size_t>(smem_bytes(tile_rows, heads, regs));
    // launch_tiled's error where one CTA's shared memory exceeds the device's: the arguments that
    // set it, (max_tokens, K, ring_len) in that order (the snapshot form has no ring).
    const char* smem_sizes = kSpec ? "max_tokens = %d with K = %d, or ring_len R = %d, too large for the history, "
                                     "window and state tiles of one CTA"
                                   : "max_tokens = %d with K = %d too large for the window and state tiles of one CTA";
    // The snapshot form (the per-draft baseline) launches without overlap: dependent_launch.cuh.
    constexpr EarlyLaunch kEarly = WM == WindowMode::kSnapshotUpdate ? EarlyLaunch::kNo : EarlyLaunch::kYes;
    if constexpr (kRegBuilt) {
      if (regs && reg_ctas == kWindowRegAltCtas)
        return launch_tiled(gdn_window_kernel<WM, kT, K, ST, AT, 1, true, kWindowRegAltCtas>, p, tiles, tile_rows, bytes,
                            stream, 1, kEarly, smem_sizes, p.max_tokens, K, p.ring_len);
      if (regs)
        return launch_tiled(gdn_window_kernel<WM, kT, K, ST, AT, 1, true>, p, tiles, tile_rows, bytes, stream, 1, kEarly,
                            smem_sizes, p.max_tokens, K, p.ring_len);
    }
    if constexpr (kSpec && kT <= kMaxPairTokens) {
      if (heads == 2)
        return launch_tiled(gdn_window_kernel<WM, kT, K, ST, AT, 2>, p, tiles, tile_rows, bytes, stream, 2, kEarly,
                            smem_sizes, p.max_tokens, K, p.ring_len);
    }
    return launch_tiled(gdn_window_kernel<WM, kT, K, ST, AT, 1>, p, tiles, tile_rows, bytes, stream, 1, kEarly, smem_sizes,
                        p.max_tokens, K, p.ring_len);
  }

  template <int K, typename ST, typename AT>
  static const char* run(const GdnParams& p, cudaStream_t stream) {
    constexpr bool kSpec = WM == WindowMode::kSpecVerify;
    if (p.cu_seqlens == nullptr) return "the window kernel needs cu_seqlens";
    // max_tokens = 0 (a snapshot_slots of width 0) leaves no room for a live row's tokens: the
    // kernel would skip every row (as it skips any row outside the contract), so nothing is launched.
    if (p.batch == 0 || p.max_tokens < 1) return nullptr;
    if (kSpec && p.max_tokens > kMaxSpecTokens) return "max_tokens must be <= 8 (the spec-verify kernel's window)";
    if (!kSpec && p.snapshot_slots == nullptr) return "the snapshot state update needs snapshot_slots";
    if constexpr (kSpec) {
      switch (spec_window_tile(p.max_tokens)) {
        case 1: return launch<1, K, ST, AT>(p, stream);
        case 2: return launch<2, K, ST, AT>(p, stream);
        case 4: return launch<4, K, ST, AT>(p, stream);
        default: return launch<8, K, ST, AT>(p, stream);
      }
    } else {
      return launch<0, K, ST, AT>(p, stream);
    }
  }
};

template <WindowMode WM, typename ST>
const char* launch_window_for_state(const GdnParams& p, void* stream) {
  return dispatch_k_and_act<WindowLauncher<WM>, ST>(p, stream);
}

// The per-(mode, state dtype) slices, one instantiation file each.
const char* launch_gdn_spec_verify_f32(const GdnParams& p, void* stream);
const char* launch_gdn_spec_verify_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_verify_f16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_f32(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_f16(const GdnParams& p, void* stream);

}  // namespace replayssm::gdn
