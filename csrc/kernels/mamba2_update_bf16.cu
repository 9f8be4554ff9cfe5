// Classic Mamba-2 step kernels (mamba2_state_update) with a bf16 state: every activation dtype
// and dstate. One state dtype per file so the instantiations compile in parallel.
#include "replayssm/mamba2/launch_impl.cuh"

namespace replayssm::mamba2 {
template const char* launch_state_update_for_state<__nv_bfloat16>(const StateUpdateParams& p, void* stream);
}  // namespace replayssm::mamba2
