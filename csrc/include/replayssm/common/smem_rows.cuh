// A short row of fp32 values in shared memory read into registers, shared by the kernel families:
// the per-entry weight rows of the spec kernels' replay sums (kT values per history entry, one row
// per entry), where one 16-byte load replaces kT scalar loads.
#pragma once

#include <cuda_runtime.h>

namespace replayssm {

// kM consecutive floats of shared memory into registers, 16 bytes at a time where kM allows. The
// source is aligned to min(kM, 4) floats.
template <int kM>
__device__ __forceinline__ void load_smem_row(const float* src, float (&v)[kM]) {
  if constexpr (kM % 4 == 0) {
#pragma unroll
    for (int q = 0; q < kM / 4; ++q) {
      const float4 t = reinterpret_cast<const float4*>(src)[q];
      v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
    }
  } else if constexpr (kM == 2) {
    const float2 t = *reinterpret_cast<const float2*>(src);
    v[0] = t.x, v[1] = t.y;
  } else {
#pragma unroll
    for (int m = 0; m < kM; ++m) v[m] = src[m];
  }
}

}  // namespace replayssm
