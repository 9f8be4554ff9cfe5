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
