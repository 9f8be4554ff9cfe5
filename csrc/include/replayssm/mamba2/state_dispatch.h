// The per-state-dtype launchers: declared here, defined in launch_impl.cuh and instantiated once
// per state dtype in csrc/kernels/mamba2_{replay,update}_<state>.cu (parallel compile units).
#pragma once

#include "replayssm/mamba2/params.h"

namespace replayssm::mamba2 {

template <typename St>
const char* launch_replay_for_state(const ReplayParams& p, void* stream);
template <typename St>
const char* launch_state_update_for_state(const StateUpdateParams& p, void* stream);
// Instantiated per state dtype and window tile in csrc/kernels/mamba2_spec_<state>_t<kT>.cu.
template <typename St, int kT>
const char* launch_spec_verify_for_state(const SpecVerifyParams& p, void* stream);

}  // namespace replayssm::mamba2
