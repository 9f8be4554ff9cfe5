// gdn_state_update with a f16 checkpoint: every activation dtype and K (torch-free instantiations).
#include "replayssm/gdn/dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_state_update_f16(const GdnParams& p, void* stream) {
  return launch_for_state<Mode::kStateUpdate, __half>(p, stream);
}

}  // namespace replayssm::gdn
