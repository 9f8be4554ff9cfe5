// gdn_state_update's snapshot (spec baseline) form with a f16 checkpoint: every activation dtype
// and K (torch-free instantiations).
#include "replayssm/gdn/spec_dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_spec_snapshot_f16(const GdnParams& p, void* stream) {
  return launch_window_for_state<WindowMode::kSnapshotUpdate, __half>(p, stream);
}

}  // namespace replayssm::gdn
