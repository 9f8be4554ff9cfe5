// gdn_spec_verify with a f32 checkpoint: every activation dtype and K (torch-free instantiations).
#include "replayssm/gdn/spec_dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_spec_verify_f32(const GdnParams& p, void* stream) {
  return launch_window_for_state<WindowMode::kSpecVerify, float>(p, stream);
}

}  // namespace replayssm::gdn
