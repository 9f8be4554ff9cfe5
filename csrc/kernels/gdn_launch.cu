// The GDN entry points of replayssm/gdn/launch.h: pick the slice for the checkpoint dtype.
#include "replayssm/gdn/dispatch.cuh"
#include "replayssm/gdn/launch.h"
#include "replayssm/gdn/spec_dispatch.cuh"

namespace replayssm::gdn {

const char* launch_gdn_decode(const GdnParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kF32: return launch_gdn_decode_f32(p, stream);
    case DType::kBF16: return launch_gdn_decode_bf16(p, stream);
    case DType::kF16: return launch_gdn_decode_f16(p, stream);
  }
  return "unknown state dtype";
}

const char* launch_gdn_spec_verify(const GdnParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kF32: return launch_gdn_spec_verify_f32(p, stream);
    case DType::kBF16: return launch_gdn_spec_verify_bf16(p, stream);
    case DType::kF16: return launch_gdn_spec_verify_f16(p, stream);
  }
  return "unknown state dtype";
}

const char* launch_gdn_state_update(const GdnParams& p, void* stream) {
  if (p.cu_seqlens != nullptr) {  // the snapshot (spec baseline) form: the window kernel
    switch (p.state_dtype) {
      case DType::kF32: return launch_gdn_spec_snapshot_f32(p, stream);
      case DType::kBF16: return launch_gdn_spec_snapshot_bf16(p, stream);
      case DType::kF16: return launch_gdn_spec_snapshot_f16(p, stream);
    }
    return "unknown state dtype";
  }
  switch (p.state_dtype) {
    case DType::kF32: return launch_gdn_state_update_f32(p, stream);
    case DType::kBF16: return launch_gdn_state_update_bf16(p, stream);
    case DType::kF16: return launch_gdn_state_update_f16(p, stream);
  }
  return "unknown state dtype";
}

const char* launch_gdn_flush(const GdnParams& p, void* stream) {
  switch (p.state_dtype) {
    case DType::kF32: return launch_gdn_flush_f32(p, stream);
    case DType::kBF16: return launch_gdn_flush_bf16(p, stream);
    case DType::kF16: return launch_gdn_flush_f16(p, stream);
  }
  return "unknown state dtype";
}

}  // namespace replayssm::gdn
