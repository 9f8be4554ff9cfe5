// gdn_decode with a bf16 checkpoint: every activation dtype and K (torch-free instantiations).
#include "replayssm/gdn/dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_decode_bf16(const GdnParams& p, void* stream) {
  return launch_for_state<Mode::kDecode, __nv_bfloat16>(p, stream);
}

}  // namespace replayssm::gdn
