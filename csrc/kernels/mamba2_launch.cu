// Entry points of the Mamba-2 kernels (replayssm/mamba2/launch.h): dispatch on the state dtype to
// the per-dtype instantiation files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "replayssm/mamba2/launch.h"
#include "replayssm/mamba2/state_dispatch.h"

namespace replayssm::mamba2 {

const char* launch_replay(const ReplayParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kFloat32: return launch_replay_for_state<float>(p, stream);
    case DType::kBFloat16: return launch_replay_for_state<__nv_bfloat16>(p, stream);
    case DType::kFloat16: return launch_replay_for_state<__half>(p, stream);
  }
  return "unsupported state dtype";
}

const char* launch_state_update(const StateUpdateParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kFloat32: return launch_state_update_for_state<float>(p, stream);
    case DType::kBFloat16: return launch_state_update_for_state<__nv_bfloat16>(p, stream);
    case DType::kFloat16: return launch_state_update_for_state<__half>(p, stream);
  }
  return "unsupported state dtype";
}

}  // namespace replayssm::mamba2
