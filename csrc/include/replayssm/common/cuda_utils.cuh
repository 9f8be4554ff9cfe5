// Small CUDA helpers shared by every kernel family.
#pragma once

#include <cuda_runtime.h>

namespace replayssm {

// The status a launcher hands back to the torch boundary: nullptr, or the launch error's text.
inline const char* launch_status() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace replayssm
