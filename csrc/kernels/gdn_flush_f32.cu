// gdn_flush with a f32 checkpoint: every activation dtype and K (torch-free instantiations).
#include "replayssm/gdn/dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_flush_f32(const GdnParams& p, void* stream) {
  return launch_for_state<Mode::kFold, float>(p, stream);
}

}  // namespace replayssm::gdn
