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

template <WindowMode WM>
struct WindowLauncher {
  template <int kT, int K, typename ST, typename AT>
  static const char* launch(const GdnParams& p, cudaStream_t stream) {
    constexpr int kRowsPerWarp = 32 / (K / 16);
    constexpr bool kSpec = WM == WindowMode::kSpecVerify;
    int tiles = 0, tile_rows = 0;
    if (const char* err = choose_tiles(p, kRowsPerWarp, &tiles, &tile_rows)) return err;
    const WindowSmem lay = window_smem(kSpec, kWindowTensorCores<WM, kT, ST, AT>, p.ring_len, kSpec ? kT : p.max_tokens, tile_rows, K,
                                       static_cast<int>(sizeof(ST)), static_cast<int>(sizeof(AT)));
    return launch_tiled(gdn_window_kernel<WM, kT, K, ST, AT>, p, tiles, tile_rows,
                        static_cast<size_t>(lay.total) * sizeof(float), stream,
                        kSpec ? "ring_len or max_tokens too large: the history, window and state tiles of one CTA "
                                "exceed the shared memory of the device"
                              : "max_tokens too large: the window and state tiles of one CTA exceed the shared memory "
                                "of the device");
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
