// Raw-pointer parameter blocks of the Mamba-2 kernels, filled by csrc/ops/mamba2_ops.cpp. Strides
// are in elements; every per-slot tensor carries its own slot (dim 0) stride because paged caches
// are views into wider pages. Inner dims are contiguous (checked at the boundary). No torch, no
// CUDA headers.
#pragma once

#include <cstdint>

namespace replayssm::mamba2 {

enum class DType : int32_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// What a live row of a replay launch does.
enum class ReplayMode : int32_t {
  kOutputOnly = 0,      // mamba2_decode, route output_only: non-flush rows never form the state
  kStateAndOutput = 1,  // mamba2_decode, route state_and_output: non-flush rows form the state tile
  kFold = 2,            // mamba2_flush: fold each listed slot's history, no output, no ring write
};

// Per-token inputs and the output. Dim 0 is the row (decode) or token (varlen); its stride is
// given, the dims after it are contiguous: x, z, out (., H, P); dt (., H); B, C (., G, N).
struct TokenInputs {
  const void* x;
  int64_t x_stride;
  const void* dt;
  int64_t dt_stride;
  const void* B;
  int64_t B_stride;
  const void* C;
  int64_t C_stride;
  const void* z;  // nullptr: no gating
  int64_t z_stride;
  void* out;
  int64_t out_stride;
};

// Per-layer parameters, fp32, (H,) each; D and dt_bias may be nullptr.
struct LayerParams {
  const float* A;
  const float* D;
  const float* dt_bias;
  bool dt_softplus;
};

struct Geometry {
  int32_t H;
  int32_t P;
  int32_t N;
  int32_t G;
  int32_t heads_per_group;  // H / G: a head's group without a run-time division in the kernels
};

// mamba2_decode (kOutputOnly / kStateAndOutput) and mamba2_flush (kFold; tok unused).
struct ReplayParams {
  TokenInputs tok;
  LayerParams layer;
  Geometry geo;
  const int32_t* slots;  // (batch,)
  int32_t batch;
  int32_t null_slot;     // kNoNullSlot when none
  int64_t num_slots;
  const int32_t* hist;   // (slots,) cursors, read only
  const int32_t* start;
  const int8_t* flush;   // nullptr for kFold
  void* state;           // (slots, H, P, N) state dtype
  int64_t state_stride;
  bool state_vec_aligned;  // base and slot stride 16-byte aligned: vector loads / stores
  void* ring_x;          // (slots, H, R, P) act
  int64_t ring_x_stride;
  void* ring_B;          // (slots, G, R, N) act
  int64_t ring_B_stride;
  float* ring_dt;        // (slots, H, R) fp32, dt after bias and softplus
  int64_t ring_dt_stride;
  int32_t ring_len;      // R
  // ring_x, ring_B (and for decode / spec the token x and B) have 16-byte aligned bases and dim-0
  // strides, and P, N rows of whole 16-byte pieces: the entries are staged with cp.async.
  bool entries_vec_aligned;
  ReplayMode mode;
  DType act;
  DType state_dtype;
};

// mamba2_spec_verify: the replay fields as for mamba2_decode (`mode` unused; `tok` is indexed by
// token, dim 0 = tokens), plus the packed rows: row r owns tokens cu_seqlens[r] .. cu_seqlens[r+1]-1,
// 1 <= n <= max_tokens.
struct SpecVerifyParams {
  ReplayParams replay;
  const int32_t* cu_seqlens;  // (batch+1,)
  int64_t num_tokens;         // dim 0 of x: rows whose token range leaves it are skipped
  int32_t max_tokens;         // T (<= kMaxSpecTokens on CUDA)
  // Iterations of the CUDA-core state stream asked of L2 ahead of its loads (0: none); set by the
  // launcher (spec_l2_lead), not by the ops.
  int32_t l2_lead_iters;
};

// The largest T the CUDA spec kernels are compiled for (the window's C vectors live in registers).
constexpr int32_t kMaxSpecTokens = 8;

// mamba2_state_update: the classic step. Without cu_seqlens one token per row, state[slots[r]]
// read and written in place; with it, row r's tokens cu_seqlens[r] .. cu_seqlens[r+1]-1 start from
// state[slots[r]] and the state after token i goes to state[snapshot_slots[r, i]].
struct StateUpdateParams {
  TokenInputs tok;
  LayerParams layer;
  Geometry geo;
  const int32_t* slots;
  int32_t batch;
  int32_t null_slot;
  int64_t num_slots;
  void* state;
  int64_t state_stride;
  bool state_vec_aligned;
  const int32_t* cu_seqlens;      // nullptr: plain form
  const int32_t* snapshot_slots;  // (batch, T) when cu_seqlens is given
  int64_t snapshot_stride;
  int32_t max_tokens;             // T (1 in the plain form)
  DType act;
  DType state_dtype;
};

}  // namespace replayssm::mamba2
