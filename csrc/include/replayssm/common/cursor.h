// The cursor rules of ReplaySSM: the one definition used by the CPU and CUDA commit/reset ops and
// by every kernel that addresses the ring. docs/contract.md states them in words;
// replayssm_ext/cursor_rules.py mirrors them for the Python reference and is tested against this.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RS_HD __host__ __device__ __forceinline__
#else
#define RS_HD inline
#endif

namespace replayssm {

// Slot ids that mean "no sequence here". -1 is always padding; a paged allocator may also reserve
// a null block id (null_slot >= 0). kNoNullSlot says there is none.
constexpr int32_t kPadSlot = -1;
constexpr int32_t kNoNullSlot = -1;

// Rows whose slot is padding, or lies outside the cache (which only a caller bug produces, and
// which the CUDA path cannot check without a host sync), write nothing.
RS_HD bool slot_is_live(int32_t slot, int32_t null_slot, int64_t num_slots) {
  return slot >= 0 && slot != null_slot && static_cast<int64_t>(slot) < num_slots;
}

// Physical ring position of logical entry `logical` (0 = oldest unfolded entry).
RS_HD int32_t ring_index(int32_t start, int32_t logical, int32_t ring_len) {
  return (start + logical) % ring_len;
}

// ring_index for arguments a kernel has already checked against the contract (0 <= start <
// ring_len, 0 <= logical <= ring_len): the same position from one compare instead of an integer
// division (about twenty instructions with a run-time ring_len), for the per-entry loops.
RS_HD int32_t ring_index_checked(int32_t start, int32_t logical, int32_t ring_len) {
  const int32_t pos = start + logical;
  return pos >= ring_len ? pos - ring_len : pos;
}

// The early-flush rule: after a commit leaves `hist` committed entries, the next step must fold
// first if a further full window could not follow it without passing the history capacity. With
// it a non-flush step sees hist <= B - T and a flush step hist <= B, so hist + n <= B + T <= R.
RS_HD int8_t flush_due(int32_t hist, int32_t hist_capacity, int32_t max_tokens) {
  return static_cast<int8_t>(hist + 2 * max_tokens > hist_capacity + max_tokens);
}

struct Cursor {
  int32_t hist;
  int32_t start;
  int8_t flush;
};

// Once per model step, after acceptance is known. A flush step already folded `hist` entries into
// the checkpoint, so the window it wrote (at logical hist..) becomes logical 0.. by moving start.
RS_HD Cursor commit_cursor(Cursor c, int32_t accepted, int32_t hist_capacity, int32_t max_tokens,
                           int32_t ring_len) {
  Cursor next;
  if (c.flush) {
    next.start = ring_index(c.start, c.hist, ring_len);
    next.hist = accepted;
  } else {
    next.start = c.start;
    next.hist = c.hist + accepted;
  }
  next.flush = flush_due(next.hist, hist_capacity, max_tokens);
  return next;
}

// After prefill wrote the checkpoint (or after a fold on demand): an empty history.
RS_HD Cursor reset_cursor(int32_t hist_capacity, int32_t max_tokens) {
  return Cursor{0, 0, flush_due(0, hist_capacity, max_tokens)};
}

}  // namespace replayssm
