// Host entry points of the Mamba-2 CUDA kernels as the torch boundary sees them. Torch-free and
// CUDA-header-free: streams travel as void*.
#pragma once

#include "replayssm/mamba2/params.h"

namespace replayssm::mamba2 {

// Each returns nullptr on success, else a description of the failure (CUDA error text or an
// unsupported configuration).
const char* launch_replay(const ReplayParams& p, void* stream);
const char* launch_state_update(const StateUpdateParams& p, void* stream);
// mamba2_spec_verify; p.max_tokens must be in [1, kMaxSpecTokens] (the boundary checks it).
const char* launch_spec_verify(const SpecVerifyParams& p, void* stream);

}  // namespace replayssm::mamba2
