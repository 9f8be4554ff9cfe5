// commit / reset applied to one row: the same code runs in the CPU loop and in the CUDA kernel.
#pragma once

#include "replayssm/common/cursor.h"
#include "replayssm/common/params.h"

namespace replayssm {

RS_HD void commit_row(const CommitParams& p, int32_t row) {
  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  const int32_t accepted = p.accepted[row];
  // The CPU op rejects these before writing; on the device (no host sync) the row is left as is.
  if (accepted < 1 || accepted > p.max_tokens) return;
  Cursor c{p.cursor.hist[slot], p.cursor.start[slot], p.cursor.flush[slot]};
  c = commit_cursor(c, accepted, p.hist_capacity, p.max_tokens, p.ring_len);
  p.cursor.hist[slot] = c.hist;
  p.cursor.start[slot] = c.start;
  p.cursor.flush[slot] = c.flush;
}

RS_HD void reset_row(const ResetParams& p, int32_t row) {
  const int32_t slot = p.slots[row];
  if (!slot_is_live(slot, p.null_slot, p.num_slots)) return;
  const Cursor c = reset_cursor(p.hist_capacity, p.max_tokens);
  p.cursor.hist[slot] = c.hist;
  p.cursor.start[slot] = c.start;
  p.cursor.flush[slot] = c.flush;
}

}  // namespace replayssm
