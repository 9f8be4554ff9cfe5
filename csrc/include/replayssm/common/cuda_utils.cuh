// Small CUDA helpers shared by every kernel family.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

namespace replayssm {

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

// The status a launcher hands back to the torch boundary: nullptr, or the launch error's text.
inline const char* launch_status() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// SM count of the current device (cached per device). Only launch shapes depend on it, so a
// failed query falls back to an H200's 132 rather than failing the launch.
inline int num_sms() {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 132;
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) sms = 132;
  if (dev < 64) cached[dev] = sms;
  return sms;
}

}  // namespace replayssm
