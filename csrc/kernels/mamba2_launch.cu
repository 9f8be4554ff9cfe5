// Entry points of the Mamba-2 kernels (replayssm/mamba2/launch.h): dispatch on the state dtype to
// the per-dtype instantiation files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "replayssm/mamba2/launch.h"
#include "replayssm/mamba2/state_dispatch.h"

namespace replayssm::mamba2 {

const char* launch_replay(const ReplayParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kFloat32: return launch_replay_for_state<float>(p, stream);
    case DType::kBFloat16: return launch_replay_for_state<__nv_bfloat16>(p, stream);
    case DType::kFloat16: return launch_replay_for_state<__half>(p, stream);
  }
  return "unsupported state dtype";
}

const char* launch_state_update(const StateUpdateParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kFloat32: return launch_state_update_for_state<float>(p, stream);
    case DType::kBFloat16: return launch_state_update_for_state<__nv_bfloat16>(p, stream);
    case DType::kFloat16: return launch_state_update_for_state<__half>(p, stream);
  }
  return "unsupported state dtype";
}

namespace {

template <typename St>
const char* spec_verify_for_state(const SpecVerifyParams& p, void* stream) {
  // The window tile: the smallest power of two >= T, at least 2 (a shorter row leaves the rest of it
  // unused; T = 1 shares the 2-token tile rather than adding instantiations: compile time).
  const int32_t T = p.max_tokens;
  if (T <= 2) return launch_spec_verify_for_state<St, 2>(p, stream);
  if (T <= 4) return launch_spec_verify_for_state<St, 4>(p, stream);
  if (T <= kMaxSpecTokens) return launch_spec_verify_for_state<St, 8>(p, stream);
  return "max_tokens exceeds the largest window the CUDA spec kernels are compiled for";
}

}  // namespace

const char* launch_spec_verify(const SpecVerifyParams& p, void* stream) {
  switch (p.replay.state_dtype) {
    case DType::kFloat32: return spec_verify_for_state<float>(p, stream);
    case DType::kBFloat16: return spec_verify_for_state<__nv_bfloat16>(p, stream);
    case DType::kFloat16: return spec_verify_for_state<__half>(p, stream);
  }
  return "unsupported state dtype";
}

}  // namespace replayssm::mamba2
