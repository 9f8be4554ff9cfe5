// Host entry points of the CUDA kernels, as the torch boundary (csrc/ops) sees them. Torch-free and
// CUDA-header-free: streams travel as void* so the .cpp launchers compile without the toolkit.
#pragma once

#include "replayssm/common/params.h"

namespace replayssm {

// Each returns nullptr on success, else the CUDA error string of the launch.
const char* launch_commit(const CommitParams& p, void* stream);
const char* launch_reset(const ResetParams& p, void* stream);

}  // namespace replayssm
