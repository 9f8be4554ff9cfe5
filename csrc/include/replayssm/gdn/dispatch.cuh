// Launch configuration and the dtype / K dispatch of the GDN row kernel. Included by the
// instantiation files csrc/kernels/gdn_*.cu, each of which instantiates one (mode, state dtype)
// slice so the slices compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/gdn/params.h"
#include "replayssm/gdn/rows_kernel.cuh"

namespace replayssm::gdn {

// Tiles per (row, v-head): the fewest (at least min_tiles) that give the grid about ctas_per_sm CTAs
// per SM (a small batch is split along V so it still fills the GPU), each warp keeping at least one
// row group.
inline int pick_tiles(const GdnParams& p, int rows_per_warp, int min_tiles = 1, int ctas_per_sm = 2) {
  const int max_tiles = p.V / (rows_per_warp * kWarps) > 0 ? p.V / (rows_per_warp * kWarps) : 1;
  const int sms = num_sms();
  const int64_t heads = static_cast<int64_t>(p.batch) * p.HV;
  int tiles = 1;
  while (tiles < max_tiles && (tiles < min_tiles || heads * tiles < static_cast<int64_t>(ctas_per_sm) * sms)) tiles *= 2;
  return tiles;
}

// The tiling of V for a kernel whose row groups hold rows_per_warp rows: p.tiles_per_head when set,
// else pick_tiles. Returns an error, or nullptr with *tiles and *tile_rows set.
inline const char* choose_tiles(const GdnParams& p, int rows_per_warp, int* tiles, int* tile_rows,
                                int min_tiles = 1, int ctas_per_sm = 2) {
  *tiles = p.tiles_per_head > 0 ? p.tiles_per_head : pick_tiles(p, rows_per_warp, min_tiles, ctas_per_sm);
  if (p.V % *tiles != 0 || (p.V / *tiles) % rows_per_warp != 0)
    return "tiles_per_head must split V into tiles of a multiple of 512/K rows";
  *tile_rows = p.V / *tiles;
  // The window kernel divides by tile_rows with shifts. V is 64, 128 or 256 (the ops check it), so
  // every tiling that divides it passes; this names the rule should that ever change.
  if ((*tile_rows & (*tile_rows - 1)) != 0) return "tiles_per_head must split V into tiles of a power-of-two number of rows";
  return nullptr;
}

// Launches one of the tiled kernels (grid tiles x HV x batch, kThreads threads, `bytes` of dynamic
// shared memory; `early` as dependent_launch.cuh says for the site; heads: v-heads per CTA). Shared
// memory the device cannot give one CTA is an error naming the arguments that set its size
// (`smem_sizes`, a printf format of `sizes`: allow_dynamic_smem) rather than a failed launch.
template <typename Kernel, typename... Sizes>
const char* launch_tiled(Kernel kernel, const GdnParams& p, int tiles, int tile_rows, size_t bytes,
                         cudaStream_t stream, int heads, EarlyLaunch early, const char* smem_sizes, Sizes... sizes) {
  if (const char* err = allow_dynamic_smem(kernel, bytes, smem_sizes, sizes...)) return err;
  // Grid (tiles, HV, batch): the kernels read their indices without dividing. The ops check batch
  // and HV against the 65535 limit of the y and z extents with the actual values.
  if (p.batch > 65535 || p.HV > 65535) return "batch or HV exceeds the CUDA grid limit of 65535";
  // HV is a multiple of heads (the window kernel's kHeads).
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.HV / heads), static_cast<unsigned>(p.batch));
  return launch_kernel(early, kernel, grid, dim3(kThreads), bytes, stream, p, tiles, tile_rows);
}

// The run-time K and activation dtype to the template arguments of Launcher::run<K, ST, AT>: one
// switch for the row and the window kernels, so both accept exactly the same (K, dtype) set.
template <typename Launcher, typename ST, typename AT>
const char* dispatch_k(const GdnParams& p, cudaStream_t stream) {
  switch (p.K) {
    case 64: return Launcher::template run<64, ST, AT>(p, stream);
    case 128: return Launcher::template run<128, ST, AT>(p, stream);
    case 256: return Launcher::template run<256, ST, AT>(p, stream);
    default: return "K must be 64, 128 or 256";
  }
}

template <typename Launcher, typename ST>
const char* dispatch_k_and_act(const GdnParams& p, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.act_dtype) {
    case DType::kF32: return dispatch_k<Launcher, ST, float>(p, s);
    case DType::kBF16: return dispatch_k<Launcher, ST, __nv_bfloat16>(p, s);
    case DType::kF16: return dispatch_k<Launcher, ST, __half>(p, s);
  }
  return "unknown activation dtype";
}

// State bytes per CTA of the classic step, at most: its CTAs replay no ring, so splitting a head
// costs only the token's q / k loads and norms again, and short CTAs start their streams sooner.
// H200, batch 256, fp32, K = V = 128: whole heads (64 KB) vs 16 KB tiles, 284.8 -> 281.6 us
// (Qwen3.5-4B) and 561.8 -> 552.2 (122B) with the .cs stores, 279.0 / 547.7 with plain ones.
constexpr int kStateUpdateTileBytes = 16 * 1024;

template <Mode M>
struct RowsLauncher {
  template <int K, typename ST, typename AT>
  static const char* run(const GdnParams& p, cudaStream_t stream) {
    constexpr int kRowsPerWarp = 32 / (K / 16);
    if (p.batch == 0) return nullptr;
    const int head_bytes = p.V * K * static_cast<int>(sizeof(ST));
    const int min_tiles = M == Mode::kStateUpdate && head_bytes > kStateUpdateTileBytes
                              ? head_bytes / kStateUpdateTileBytes : 1;
    int tiles = 0, tile_rows = 0;
    if (const char* err = choose_tiles(p, kRowsPerWarp, &tiles, &tile_rows, min_tiles)) return err;
    const SmemLayout lay = smem_layout(p.ring_len, tile_rows, K, static_cast<int>(sizeof(ST)),
                                       static_cast<int>(sizeof(AT)), M != Mode::kStateUpdate);
    return launch_tiled(gdn_rows_kernel<M, K, ST, AT>, p, tiles, tile_rows,
                        static_cast<size_t>(lay.total) * sizeof(float), stream, 1, EarlyLaunch::kYes,
                        "ring_len R = %d with K = %d too large for the history and k_j tiles of one CTA", p.ring_len, K);
  }
};

template <Mode M, typename ST>
const char* launch_for_state(const GdnParams& p, void* stream) {
  return dispatch_k_and_act<RowsLauncher<M>, ST>(p, stream);
}

// The per-(mode, state dtype) slices, one instantiation file each.
const char* launch_gdn_decode_f32(const GdnParams& p, void* stream);
const char* launch_gdn_decode_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_decode_f16(const GdnParams& p, void* stream);
const char* launch_gdn_state_update_f32(const GdnParams& p, void* stream);
const char* launch_gdn_state_update_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_state_update_f16(const GdnParams& p, void* stream);
const char* launch_gdn_flush_f32(const GdnParams& p, void* stream);
const char* launch_gdn_flush_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_flush_f16(const GdnParams& p, void* stream);

}  // namespace replayssm::gdn
