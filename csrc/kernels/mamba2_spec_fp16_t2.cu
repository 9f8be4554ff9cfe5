// Mamba-2 spec-verify kernels (mamba2_spec_verify) with a fp16 checkpoint and a window tile of
// 2 token(s): every activation dtype and dstate. One (state dtype, tile) per file so the
// instantiations compile in parallel.
#include "replayssm/mamba2/launch_impl.cuh"

namespace replayssm::mamba2 {
template const char* launch_spec_verify_for_state<__half, 2>(const SpecVerifyParams& p, void* stream);
}  // namespace replayssm::mamba2
