// Host entry points of the Gated DeltaNet kernels, as the torch boundary sees them. Torch-free and
// CUDA-header-free: streams travel as void*. Each returns nullptr on success, else an error text
// (a CUDA launch error, or a configuration the kernels do not cover).
#pragma once

#include "replayssm/gdn/params.h"

namespace replayssm::gdn {

// Replay decode, one token per row: flush rows fold their history into the checkpoint first; the
// output comes from checkpoint + ring; u, k̂, g are appended to the ring at logical hist.
const char* launch_gdn_decode(const GdnParams& p, void* stream);

// Speculative verify over packed rows of <= max_tokens (<= kMaxSpecTokens = 8) tokens: flush rows
// fold their history first; outputs from checkpoint + ring + the window's triangular solve; the
// window's u, k̂, g are appended to the ring at logical hist.
const char* launch_gdn_spec_verify(const GdnParams& p, void* stream);

// Classic step (the baseline): S <- e^g S (I - beta k k^T) + beta v k^T, y = S q. Plain form
// (cu_seqlens == nullptr): one token per row, in place. Snapshot form: the row's tokens from
// state[slots[r]], the state after token i written to state[snapshot_slots[r, i]].
const char* launch_gdn_state_update(const GdnParams& p, void* stream);

// Fold on demand: checkpoint <- state after the slot's hist ring entries (cursors untouched).
const char* launch_gdn_flush(const GdnParams& p, void* stream);

}  // namespace replayssm::gdn
