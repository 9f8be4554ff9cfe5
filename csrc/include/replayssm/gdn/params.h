// Parameter block of the Gated DeltaNet kernels (gdn_decode, gdn_spec_verify, gdn_state_update,
// gdn_flush), filled
// at the torch boundary (csrc/ops/gdn_ops.cpp). Raw pointers, strides in elements. No torch, no
// CUDA headers.
#pragma once

#include <cstdint>

namespace replayssm::gdn {

// Element types the kernels are instantiated for (checkpoint and activations).
enum class DType : int32_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

struct GdnParams {
  // Per-token inputs: one token per row (decode, plain state_update) or the rows' packed tokens
  // (spec verify, snapshot state_update; see cu_seqlens); unused by flush. Each tensor's
  // inner dims are contiguous; the row (dim 0) stride is free, so q/k/v may be views of one packed
  // projection output.
  const void* q;  // (batch, H, K) act
  const void* k;  // (batch, H, K) act
  const void* v;  // (batch, HV, V) act
  const void* a;  // (batch, HV) act
  const void* b;  // (batch, HV) act
  int64_t q_row_stride, k_row_stride, v_row_stride, a_row_stride, b_row_stride;
  const float* A_log;    // (HV,)
  const float* dt_bias;  // (HV,) or nullptr
  float scale;
  int32_t qk_l2norm;
  void* out;  // (batch, HV, V) act
  int64_t out_row_stride;

  // Rows.
  const int32_t* slots;  // (batch,)
  int32_t batch;
  int32_t null_slot;  // kNoNullSlot when none
  int64_t num_slots;

  // Packed rows (spec verify, snapshot state_update): row r owns tokens cu_seqlens[r] ..
  // cu_seqlens[r+1]-1, at most max_tokens of them; nullptr: one token per row.
  const int32_t* cu_seqlens;
  int32_t max_tokens;
  // Snapshot state_update: the state after token i of row r goes to state[snapshot_slots[r, i]]
  // ((batch, max_tokens), row stride snapshot_stride; a padding id there: no write).
  const int32_t* snapshot_slots;
  int64_t snapshot_stride;

  // Cursors (decode, spec verify, flush; unused by state_update).
  const int32_t* hist;
  const int32_t* start;
  const int8_t* flush;

  // Checkpoint (slots, HV, V, K), any slot stride.
  void* state;
  int64_t state_slot_stride;

  // Ring (decode, spec verify, flush): u (slots, HV, R, V) act, k (slots, H, R, K) act, g (slots, HV, R) fp32.
  void* ring_u;
  void* ring_k;
  float* ring_g;
  int64_t ring_u_slot_stride, ring_k_slot_stride, ring_g_slot_stride;
  int32_t ring_len;

  int32_t H, HV, K, V;
  DType state_dtype;
  DType act_dtype;
  // CTAs per (row, v-head), each owning V / tiles_per_head rows of the state; 0 picks it from the
  // batch and the device's SM count.
  int32_t tiles_per_head;
  // Stage chunks of the window kernel's state stream asked of L2 ahead of their cp.async (0: none);
  // set by the window launcher (spec_dispatch.cuh), not by the ops.
  int32_t l2_lead_chunks;
};

}  // namespace replayssm::gdn
