// Raw-pointer parameter blocks handed from the torch boundary to the kernels. Strides are in
// elements. No torch, no CUDA headers.
#pragma once

#include <cstdint>

namespace replayssm {

// Per-slot cursor arrays, shared by all layers of a model (docs/contract.md, "Cursors").
struct CursorRefs {
  int32_t* hist;
  int32_t* start;
  int8_t* flush;
};

struct CommitParams {
  const int32_t* slots;     // (batch,)
  const int32_t* accepted;  // (batch,)
  CursorRefs cursor;
  int32_t batch;
  int64_t num_slots;
  int32_t hist_capacity;
  int32_t max_tokens;
  int32_t ring_len;
  int32_t null_slot;  // kNoNullSlot when none
};

struct ResetParams {
  const int32_t* slots;
  CursorRefs cursor;
  int32_t batch;
  int64_t num_slots;
  int32_t hist_capacity;
  int32_t max_tokens;
  int32_t null_slot;
};

}  // namespace replayssm
