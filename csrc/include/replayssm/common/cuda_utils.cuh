// Small CUDA helpers shared by every kernel family.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
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
// the query fails (its error cleared) or gives no positive value, which is not cached.
template <cudaDeviceAttr kAttr>
inline int device_attribute(int fallback) {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return fallback;
  }
  if (dev < 0) return fallback;
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int value = 0;
  if (cudaDeviceGetAttribute(&value, kAttr, dev) != cudaSuccess) {
    cudaGetLastError();  // the fallback stands for the query: a later launch check must not report it
    return fallback;
  }
  if (value <= 0) return fallback;
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

// The text of a refused launch with numbers in it, formatted (printf style) into a buffer of the
// calling thread that its next such message overwrites: the op copies it into its exception before
// it launches anything else.
template <typename... Values>
inline const char* launch_message(const char* format, Values... values) {
  thread_local char text[512];
  std::snprintf(text, sizeof(text), format, values...);
  return text;
}

// Lets `kernel` take `bytes` of dynamic shared memory per CTA: above the 48 KB every kernel may
// take, only after a per-kernel opt-in, and never above the device's per-block limit. nullptr, or
// the error (nothing launched): `sizes_format` and `sizes` say which arguments set the size and
// their values, then the bytes one CTA needs and the device's limit.
template <typename Kernel, typename... Sizes>
inline const char* allow_dynamic_smem(Kernel kernel, size_t bytes, const char* sizes_format, Sizes... sizes) {
  constexpr size_t kWithoutOptIn = 48 * 1024;
  if (bytes <= kWithoutOptIn) return nullptr;
  const int limit = device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(0);
  const bool fits = limit <= 0 || bytes <= static_cast<size_t>(limit);  // an unknown limit: the opt-in decides
  if (fits && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) ==
                  cudaSuccess)
    return nullptr;
  cudaGetLastError();  // the refused opt-in is this error, not a later launch's
  char what[256];
  std::snprintf(what, sizeof(what), sizes_format, sizes...);
  if (limit > 0)
    return launch_message("%s: one CTA needs %zu bytes of shared memory, the device allows %d per block", what, bytes,
                          limit);
  return launch_message("%s: one CTA needs %zu bytes of shared memory, more than the device allows per block", what,
                        bytes);
}

}  // namespace replayssm
