// Launch configuration and the dtype / K dispatch of the GDN window kernel (spec verify and the
// snapshot state update). Included by the instantiation files csrc/kernels/gdn_spec_*.cu, each of
// which instantiates one (mode, state dtype) slice so the slices compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/gdn/dispatch.cuh"
#include "replayssm/gdn/params.h"
#include "replayssm/gdn/spec_kernel.cuh"

namespace replayssm::gdn {

template <WindowMode WM, int K, typename ST, typename AT>
const char* launch_window(const GdnParams& p, cudaStream_t stream) {
  constexpr int kRowsPerWarp = 32 / (K / 16);
  constexpr bool kSpec = WM == WindowMode::kSpecVerify;
  if (p.cu_seqlens == nullptr) return "the window kernel needs cu_seqlens";
  // max_tokens = 0 (a snapshot_slots of width 0) leaves no room for a live row's tokens: the kernel
  // would skip every row (as it skips any row outside the contract), so nothing is launched.
  if (p.batch == 0 || p.max_tokens < 1) return nullptr;
  if (kSpec && p.max_tokens > kMaxSpecTokens) return "max_tokens must be <= 8 (the spec-verify kernel's window)";
  if (!kSpec && p.snapshot_slots == nullptr) return "the snapshot state update needs snapshot_slots";
  const int tiles = p.tiles_per_head > 0 ? p.tiles_per_head : pick_tiles(p, kRowsPerWarp);
  if (p.V % tiles != 0 || (p.V / tiles) % kRowsPerWarp != 0)
    return "tiles_per_head must split V into tiles of a multiple of 512/K rows";
  const int tile_rows = p.V / tiles;
  const WindowSmem lay = window_smem(kSpec, p.ring_len, p.max_tokens, tile_rows, K, static_cast<int>(sizeof(ST)),
                                     static_cast<int>(sizeof(AT)));
  const size_t bytes = static_cast<size_t>(lay.total) * sizeof(float);
  auto kernel = gdn_window_kernel<WM, K, ST, AT>;
  if (bytes > 48 * 1024) {
    int dev = 0, optin = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (bytes > static_cast<size_t>(optin))
      return kSpec ? "ring_len or max_tokens too large: the history, window and state tiles of one CTA exceed the "
                     "shared memory of the device"
                   : "max_tokens too large: the window and state tiles of one CTA exceed the shared memory of the "
                     "device";
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) !=
        cudaSuccess)
      return launch_status();
  }
  const int64_t grid = static_cast<int64_t>(p.batch) * p.HV * tiles;
  if (grid > 0x7fffffffLL) return "batch * HV * tiles exceeds the CUDA grid limit";
  kernel<<<static_cast<unsigned>(grid), kThreads, bytes, stream>>>(p, tiles, tile_rows);
  return launch_status();
}

template <WindowMode WM, typename ST, typename AT>
const char* launch_window_for_k(const GdnParams& p, cudaStream_t stream) {
  switch (p.K) {
    case 64: return launch_window<WM, 64, ST, AT>(p, stream);
    case 128: return launch_window<WM, 128, ST, AT>(p, stream);
    case 256: return launch_window<WM, 256, ST, AT>(p, stream);
    default: return "K must be 64, 128 or 256";
  }
}

template <WindowMode WM, typename ST>
const char* launch_window_for_state(const GdnParams& p, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.act_dtype) {
    case DType::kF32: return launch_window_for_k<WM, ST, float>(p, s);
    case DType::kBF16: return launch_window_for_k<WM, ST, __nv_bfloat16>(p, s);
    case DType::kF16: return launch_window_for_k<WM, ST, __half>(p, s);
  }
  return "unknown activation dtype";
}

// The per-(mode, state dtype) slices, one instantiation file each.
const char* launch_gdn_spec_verify_f32(const GdnParams& p, void* stream);
const char* launch_gdn_spec_verify_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_verify_f16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_f32(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_bf16(const GdnParams& p, void* stream);
const char* launch_gdn_spec_snapshot_f16(const GdnParams& p, void* stream);

}  // namespace replayssm::gdn
