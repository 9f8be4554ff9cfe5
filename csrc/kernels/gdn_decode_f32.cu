// gdn_decode with a f32 checkpoint: every activation dtype and K (torch-free instantiations).
#include "replayssm/gdn/dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_decode_f32(const GdnParams& p, void* stream) {
  return launch_for_state<Mode::kDecode, float>(p, stream);
}

}  // namespace replayssm::gdn
