// The CUDA side of the torch boundary: the current device and stream of a tensor, and the check
// of a launcher's status. Launchers take streams as void* (replayssm/launch.h).
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <string>

#include "checks.h"

#ifdef REPLAYSSM_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>

namespace replayssm::ops {

// Pins the tensor's device for the launch and fetches the stream torch is recording on (the one a
// CUDA graph capture or a user's stream context has made current).
class CudaContext {
 public:
  explicit CudaContext(const Tensor& t) : guard_(t.get_device_index()) {
    void* s = nullptr;
    if (aoti_torch_get_current_cuda_stream(t.get_device_index(), &s) != AOTI_TORCH_SUCCESS)
      throw std::runtime_error("replayssm: could not get the current CUDA stream");
    stream = s;
  }
  void* stream = nullptr;

 private:
  torch::stable::accelerator::DeviceGuard guard_;
};

inline void check_launch(const char* op, const char* status) {
  if (status != nullptr) fail(op, std::string("CUDA launch failed: ") + status);
}

}  // namespace replayssm::ops
#endif
