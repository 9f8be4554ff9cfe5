// Mamba-2 replay kernels (mamba2_decode, mamba2_flush) with a fp16 checkpoint: every activation
// dtype and dstate. One state dtype per file so the instantiations compile in parallel.
#include "replayssm/mamba2/launch_impl.cuh"

namespace replayssm::mamba2 {
template const char* launch_replay_for_state<__half>(const ReplayParams& p, void* stream);
}  // namespace replayssm::mamba2
