// Small CUDA helpers shared by every kernel family.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

namespace replayssm {

// CTAs per SM that `bytes` of dynamic shared memory per CTA leave room for: the device's shared
// memory per SM (228 KB on H100, H200 and B200) with 1 KB reserved per CTA. Host and kernels
// compute the same (a layout choice some kernels repeat for themselves).
__host__ __device__ inline int smem_ctas_per_sm(int bytes) {
  constexpr int kSmemPerSm = 228 * 1024, kReservedPerCta = 1024;
  return kSmemPerSm / (bytes + kReservedPerCta);
}

// A launch-time override read from the environment (at every launch, so variants compare in one
// process): a count 0..max written as one digit (max <= 9). Unset or empty leaves *value as the
// launcher set it; any other text returns `err` (the message naming the variable).
inline const char* env_count_override(const char* name, int max, const char* err, int32_t* value) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return nullptr;
  if (v[1] != '\0' || v[0] < '0' || v[0] > '0' + max) return err;
  *value = v[0] - '0';
  return nullptr;
}

// A launcher's choice of a kernel form, with an override from the environment (read at every
// launch, so both forms compare in one process): the launcher's rule (`rule`, which implies built
// and fits) unless the variable says "0" (off) or "1" (on, where the form can run: err_not_built
// where it is not compiled for this launch, err_not_fits where this launch's shapes do not fit it).
// Unset or empty leaves the rule; any other text returns err_value.
inline const char* env_forced_choice(const char* name, const char* err_value, bool rule, bool built, bool fits,
                                     const char* err_not_built, const char* err_not_fits, bool* on) {
  *on = rule;
  int32_t forced = -1;
  if (const char* err = env_count_override(name, 1, err_value, &forced)) return err;
  if (forced == 0) *on = false;
  if (forced != 1) return nullptr;
  if (!built) return err_not_built;
  if (!fits) return err_not_fits;
  *on = true;
  return nullptr;
}

// The status a launcher hands back to the torch boundary: nullptr, or the launch error's text.
inline const char* launch_status() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// An integer attribute of the current device, cached per device (the first 64): `fallback` where
// the query fails or gives no positive value, which is not cached.
template <cudaDeviceAttr kAttr>
inline int device_attribute(int fallback) {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return fallback;
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int value = 0;
  if (cudaDeviceGetAttribute(&value, kAttr, dev) != cudaSuccess || value <= 0) return fallback;
  if (dev < 64) cached[dev] = value;
  return value;
}

// SM count of the current device. Only launch shapes depend on it, so a failed query falls back
// to an H200's 132 rather than failing the launch.
inline int num_sms() { return device_attribute<cudaDevAttrMultiProcessorCount>(132); }

// Compute capability major of the current device: 9 for H100 / H200, 10 for B200. Only kernel
// choices depend on it (a bound measured on one architecture), so a failed query reads as 0,
// which no such choice takes.
inline int device_cc_major() { return device_attribute<cudaDevAttrComputeCapabilityMajor>(0); }

// Peak DRAM bandwidth per SM of the current device in GB/s: two transfers per
// memory clock over the bus width, shared by the SMs. A prefetch distance that pays where each SM
// must keep more bytes in flight depends on it (H100 SXM: 3.35 TB/s over 132 SMs, ~25; H200: 4.9 TB/s
// over 132, ~37). A failed query gives 0, which keeps the smaller choices.
inline double dram_gbps_per_sm() {
  const int mem_khz = device_attribute<cudaDevAttrMemoryClockRate>(0);
  const int bus_bits = device_attribute<cudaDevAttrGlobalMemoryBusWidth>(0);
  return mem_khz > 0 && bus_bits > 0 ? 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9 / num_sms() : 0.0;
}

}  // namespace replayssm
