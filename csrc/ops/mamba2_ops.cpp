// Mamba-2 ops on CUDA at the torch boundary: validate (the same checks, in the same order and
// words, as replayssm_ext/_validate.py, so a bad call fails alike on every backend), fill the
// params block, launch on the current stream. No math here. The CPU implementations of these ops
// are the Python reference (replayssm_ext/_cpu_ops.py).
#ifdef REPLAYSSM_WITH_CUDA

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checks.h"
#include "device.h"
#include "replayssm/mamba2/launch.h"
#include "replayssm/mamba2/params.h"

namespace replayssm::ops {
namespace {

using mamba2::DType;
using OptTensor = std::optional<Tensor>;

constexpr std::initializer_list<ScalarType> kActDtypes = {ScalarType::BFloat16, ScalarType::Half, ScalarType::Float};
constexpr std::initializer_list<ScalarType> kStateDtypes = {ScalarType::Float, ScalarType::BFloat16, ScalarType::Half};

DType to_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return DType::kBFloat16;
    case ScalarType::Half: return DType::kFloat16;
    default: return DType::kFloat32;
  }
}

int64_t elem_size(ScalarType t) { return t == ScalarType::Float ? 4 : 2; }

void check_divides(const char* op, const char* inner_name, int64_t inner, const char* outer_name, int64_t outer,
                   const char* what) {
  if (inner < 1 || outer % inner != 0)
    fail(op, std::string(outer_name) + "=" + std::to_string(outer) + " must be a multiple of " + inner_name + "=" +
                 std::to_string(inner) + " (" + what + ")");
}

// The kernels are compiled per dstate (a power of two: whole 16-byte vectors per lane).
void check_cuda_dstate(const char* op, int64_t N) {
  if (N != 8 && N != 16 && N != 32 && N != 64 && N != 128 && N != 256)
    fail(op, "N must be one of 8, 16, 32, 64, 128, 256 on CUDA, got N=" + std::to_string(N));
}

// Whether a tensor's dim-0 rows (slots, tokens) start on 16-byte boundaries: base and dim-0 stride.
bool dim0_vec_aligned(const Tensor& t) {
  const int64_t esz = elem_size(t.scalar_type());
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 && (t.size(0) <= 1 || (t.stride(0) * esz) % 16 == 0);
}

// Whether the replay entries (rows of P and N elements in these tensors, inner dims contiguous)
// can be staged in 16-byte pieces.
bool entries_vec_aligned(std::initializer_list<const Tensor*> tensors, int64_t P, int64_t N) {
  for (const Tensor* t : tensors) {
    const int64_t esz = elem_size(t->scalar_type());
    if ((P * esz) % 16 != 0 || (N * esz) % 16 != 0 || !dim0_vec_aligned(*t)) return false;
  }
  return true;
}

struct TokenDims {
  int64_t L, H, P, G, N;
};

// _check_mamba2_token_inputs.
TokenDims check_token_inputs(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                             const Tensor& C, const OptTensor& D, const OptTensor& z, const OptTensor& dt_bias,
                             const char* lead) {
  check_dtype(op, "x", x, kActDtypes);
  const ScalarType act = x.scalar_type();
  check_shape(op, "x", x, {{lead, kAnySize}, {"H", kAnySize}, {"P", kAnySize}});
  const int64_t L = x.size(0), H = x.size(1), P = x.size(2);
  check_same_dtype(op, "dt", dt, "x", act);
  check_shape(op, "dt", dt, {{lead, L}, {"H", H}});
  check_dtype(op, "A", A, {ScalarType::Float});
  check_shape(op, "A", A, {{"H", H}});
  check_same_dtype(op, "B", B, "x", act);
  check_shape(op, "B", B, {{lead, L}, {"G", kAnySize}, {"N", kAnySize}});
  const int64_t G = B.size(1), N = B.size(2);
  check_divides(op, "G", G, "H", H, "heads per group");
  check_same_dtype(op, "C", C, "x", act);
  check_shape(op, "C", C, {{lead, L}, {"G", G}, {"N", N}});
  if (D) {
    check_dtype(op, "D", *D, {ScalarType::Float});
    check_shape(op, "D", *D, {{"H", H}});
  }
  if (z) {
    check_same_dtype(op, "z", *z, "x", act);
    check_shape(op, "z", *z, {{lead, L}, {"H", H}, {"P", P}});
  }
  if (dt_bias) {
    check_dtype(op, "dt_bias", *dt_bias, {ScalarType::Float});
    check_shape(op, "dt_bias", *dt_bias, {{"H", H}});
  }
  return {L, H, P, G, N};
}

// _check_rows: slots (batch[=L]) int32, cu_seqlens (batch+1) int32. Returns batch.
int64_t check_rows(const char* op, const Tensor& slots, const OptTensor& cu_seqlens, int64_t batch) {
  check_dtype(op, "slots", slots, {ScalarType::Int});
  check_shape(op, "slots", slots, {{"batch", batch}});
  batch = slots.size(0);
  if (cu_seqlens) {
    check_dtype(op, "cu_seqlens", *cu_seqlens, {ScalarType::Int});
    check_shape(op, "cu_seqlens", *cu_seqlens, {{"batch+1", batch + 1}});
  }
  return batch;
}

struct RingDims {
  int64_t num_slots, R, P, G, N;
};

// _check_mamba2_ring. act_ref == nullptr: ring_x names the act dtype (mamba2_flush).
RingDims check_ring(const char* op, const Tensor& ring_x, const Tensor& ring_B, const Tensor& ring_dt,
                    const Tensor& state, const char* act_ref, ScalarType act, int64_t H, int64_t P, int64_t G,
                    int64_t N) {
  if (act_ref == nullptr) {
    check_dtype(op, "ring_x", ring_x, kActDtypes);
    act = ring_x.scalar_type();
    act_ref = "ring_x";
  } else {
    check_same_dtype(op, "ring_x", ring_x, act_ref, act);
  }
  check_shape(op, "ring_x", ring_x, {{"slots", kAnySize}, {"H", H}, {"R", kAnySize}, {"P", P}});
  const int64_t num_slots = ring_x.size(0), R = ring_x.size(2);
  P = ring_x.size(3);
  check_same_dtype(op, "ring_B", ring_B, act_ref, act);
  check_shape(op, "ring_B", ring_B, {{"slots", num_slots}, {"G", G}, {"R", R}, {"N", N}});
  G = ring_B.size(1);
  N = ring_B.size(3);
  check_divides(op, "G", G, "H", H, "heads per group");
  check_dtype(op, "ring_dt", ring_dt, {ScalarType::Float});
  check_shape(op, "ring_dt", ring_dt, {{"slots", num_slots}, {"H", H}, {"R", R}});
  check_dtype(op, "state", state, kStateDtypes);
  check_shape(op, "state", state, {{"slots", num_slots}, {"H", H}, {"P", P}, {"N", N}});
  return {num_slots, R, P, G, N};
}

void check_cursors(const char* op, const Tensor& hist, const Tensor& start, const OptTensor& flush, int64_t num_slots) {
  check_dtype(op, "hist", hist, {ScalarType::Int});
  check_shape(op, "hist", hist, {{"slots", num_slots}});
  check_dtype(op, "start", start, {ScalarType::Int});
  check_shape(op, "start", start, {{"slots", num_slots}});
  if (flush) {
    check_dtype(op, "flush", *flush, {ScalarType::Char});
    check_shape(op, "flush", *flush, {{"slots", num_slots}});
  }
}

using Named = std::vector<std::pair<const char*, const Tensor*>>;

// _check_layout_and_device: inner contiguity, then full contiguity, then one device for all.
void check_layout_and_device(const char* op, const Tensor& ref, const Named& inner, const Named& dense) {
  for (const auto& [name, t] : inner) check_inner_contiguous(op, name, *t);
  for (const auto& [name, t] : dense) check_contiguous(op, name, *t);
  for (const auto& [name, t] : inner) check_same_device(op, name, *t, ref);
  for (const auto& [name, t] : dense) check_same_device(op, name, *t, ref);
}

void add_opt(Named& v, const char* name, const OptTensor& t) {
  if (t) v.emplace_back(name, &*t);
}

template <typename T>
const T* opt_ptr(const OptTensor& t) {
  return t ? static_cast<const T*>(t->data_ptr()) : nullptr;
}

mamba2::Geometry geometry(int64_t H, int64_t P, int64_t N, int64_t G) {
  return {static_cast<int32_t>(H), static_cast<int32_t>(P), static_cast<int32_t>(N), static_cast<int32_t>(G),
          static_cast<int32_t>(H / G)};
}

// The CUDA kernels' grid is (P chunks, H, batch): its y and z extents are at most 65535. `heads_arg`
// is the argument whose shape gives H.
void check_cuda_grid(const char* op, int64_t rows, const char* heads_arg, int64_t H) {
  if (rows > 65535) fail(op, "slots: the CUDA kernel takes at most 65535 rows, got " + std::to_string(rows));
  if (H > 65535) fail(op, std::string(heads_arg) + ": the CUDA kernel takes at most 65535 heads (H), got " + std::to_string(H));
}

mamba2::TokenInputs token_inputs(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C,
                                 const OptTensor& z, const Tensor& out) {
  mamba2::TokenInputs t{};
  t.x = x.data_ptr();
  t.x_stride = x.stride(0);
  t.dt = dt.data_ptr();
  t.dt_stride = dt.stride(0);
  t.B = B.data_ptr();
  t.B_stride = B.stride(0);
  t.C = C.data_ptr();
  t.C_stride = C.stride(0);
  t.z = z ? z->data_ptr() : nullptr;
  t.z_stride = z ? z->stride(0) : 0;
  t.out = out.mutable_data_ptr();
  t.out_stride = out.stride(0);
  return t;
}

mamba2::LayerParams layer_params(const Tensor& A, const OptTensor& D, const OptTensor& dt_bias, bool dt_softplus) {
  return {static_cast<const float*>(A.data_ptr()), opt_ptr<float>(D), opt_ptr<float>(dt_bias), dt_softplus};
}

void fill_ring(mamba2::ReplayParams& p, const Tensor& state, const Tensor& ring_x, const Tensor& ring_B,
               const Tensor& ring_dt, int64_t R) {
  p.state = state.mutable_data_ptr();
  p.state_stride = state.stride(0);
  p.ring_x = ring_x.mutable_data_ptr();
  p.ring_x_stride = ring_x.stride(0);
  p.ring_B = ring_B.mutable_data_ptr();
  p.ring_B_stride = ring_B.stride(0);
  p.ring_dt = static_cast<float*>(ring_dt.mutable_data_ptr());
  p.ring_dt_stride = ring_dt.stride(0);
  p.ring_len = static_cast<int32_t>(R);
  p.state_dtype = to_dtype(state.scalar_type());
  p.state_vec_aligned = dim0_vec_aligned(state);  // else the state goes element-wise
  p.entries_vec_aligned = entries_vec_aligned({&ring_x, &ring_B}, ring_x.size(3), ring_B.size(3));
}

void mamba2_decode_cuda(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, OptTensor D, OptTensor z,
                        OptTensor dt_bias, bool dt_softplus, Tensor slots, Tensor hist, Tensor start, Tensor flush,
                        Tensor state, Tensor ring_x, Tensor ring_B, Tensor ring_dt, Tensor out, std::string route,
                        std::optional<int64_t> null_slot) {
  constexpr const char* op = "mamba2_decode";
  const TokenDims d = check_token_inputs(op, x, dt, A, B, C, D, z, dt_bias, "batch");
  check_rows(op, slots, std::nullopt, d.L);
  const RingDims r = check_ring(op, ring_x, ring_B, ring_dt, state, "x", x.scalar_type(), d.H, d.P, d.G, d.N);
  check_cursors(op, hist, start, flush, r.num_slots);
  check_same_dtype(op, "out", out, "x", x.scalar_type());
  check_shape(op, "out", out, {{"batch", d.L}, {"H", d.H}, {"P", d.P}});
  Named inner{{"x", &x}, {"dt", &dt}, {"B", &B}, {"C", &C}};
  add_opt(inner, "z", z);
  inner.insert(inner.end(), {{"out", &out}, {"state", &state}, {"ring_x", &ring_x}, {"ring_B", &ring_B},
                             {"ring_dt", &ring_dt}});
  Named dense{{"A", &A}};
  add_opt(dense, "D", D);
  add_opt(dense, "dt_bias", dt_bias);
  dense.insert(dense.end(), {{"slots", &slots}, {"hist", &hist}, {"start", &start}, {"flush", &flush}});
  check_layout_and_device(op, x, inner, dense);
  if (route != "output_only" && route != "state_and_output")
    fail(op, "route must be \"output_only\" or \"state_and_output\", got \"" + route + "\"");
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_dstate(op, d.N);
  check_cuda_grid(op, d.L, "x", d.H);

  mamba2::ReplayParams p{};
  p.tok = token_inputs(x, dt, B, C, z, out);
  p.layer = layer_params(A, D, dt_bias, dt_softplus);
  p.geo = geometry(d.H, d.P, d.N, d.G);
  p.slots = static_cast<const int32_t*>(slots.data_ptr());
  p.batch = static_cast<int32_t>(d.L);
  p.null_slot = null;
  p.num_slots = r.num_slots;
  p.hist = static_cast<const int32_t*>(hist.data_ptr());
  p.start = static_cast<const int32_t*>(start.data_ptr());
  p.flush = static_cast<const int8_t*>(flush.data_ptr());
  fill_ring(p, state, ring_x, ring_B, ring_dt, r.R);
  p.entries_vec_aligned = p.entries_vec_aligned && entries_vec_aligned({&x, &B}, d.P, d.N);
  p.mode = route == "output_only" ? mamba2::ReplayMode::kOutputOnly : mamba2::ReplayMode::kStateAndOutput;
  p.act = to_dtype(x.scalar_type());
  const CudaContext ctx(x);
  check_launch(op, mamba2::launch_replay(p, ctx.stream));
}

// The CUDA spec kernels keep the window's C vectors in registers: they are compiled for windows of
// up to kMaxSpecTokens tokens.
void check_cuda_max_tokens(const char* op, int64_t max_tokens) {
  if (max_tokens > mamba2::kMaxSpecTokens)
    fail(op, "max_tokens must be <= " + std::to_string(mamba2::kMaxSpecTokens) + " on CUDA, got max_tokens=" +
                 std::to_string(max_tokens));
}

void mamba2_spec_verify_cuda(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, OptTensor D, OptTensor z,
                             OptTensor dt_bias, bool dt_softplus, Tensor cu_seqlens, Tensor slots, Tensor hist,
                             Tensor start, Tensor flush, Tensor state, Tensor ring_x, Tensor ring_B, Tensor ring_dt,
                             Tensor out, int64_t max_tokens, std::optional<int64_t> null_slot) {
  constexpr const char* op = "mamba2_spec_verify";
  // _check_mamba2_step with lead "tokens" and no route.
  const TokenDims d = check_token_inputs(op, x, dt, A, B, C, D, z, dt_bias, "tokens");
  const int64_t batch = check_rows(op, slots, cu_seqlens, kAnySize);
  const RingDims r = check_ring(op, ring_x, ring_B, ring_dt, state, "x", x.scalar_type(), d.H, d.P, d.G, d.N);
  check_cursors(op, hist, start, flush, r.num_slots);
  check_same_dtype(op, "out", out, "x", x.scalar_type());
  check_shape(op, "out", out, {{"tokens", d.L}, {"H", d.H}, {"P", d.P}});
  Named inner{{"x", &x}, {"dt", &dt}, {"B", &B}, {"C", &C}};
  add_opt(inner, "z", z);
  inner.insert(inner.end(), {{"out", &out}, {"state", &state}, {"ring_x", &ring_x}, {"ring_B", &ring_B},
                             {"ring_dt", &ring_dt}});
  Named dense{{"A", &A}};
  add_opt(dense, "D", D);
  add_opt(dense, "dt_bias", dt_bias);
  dense.insert(dense.end(), {{"slots", &slots}, {"cu_seqlens", &cu_seqlens}, {"hist", &hist}, {"start", &start},
                             {"flush", &flush}});
  check_layout_and_device(op, x, inner, dense);
  check_positive(op, "max_tokens", max_tokens);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_dstate(op, d.N);
  check_cuda_max_tokens(op, max_tokens);
  check_cuda_grid(op, batch, "x", d.H);

  mamba2::SpecVerifyParams sp{};
  mamba2::ReplayParams& p = sp.replay;
  p.tok = token_inputs(x, dt, B, C, z, out);
  p.layer = layer_params(A, D, dt_bias, dt_softplus);
  p.geo = geometry(d.H, d.P, d.N, d.G);
  p.slots = static_cast<const int32_t*>(slots.data_ptr());
  p.batch = static_cast<int32_t>(batch);
  p.null_slot = null;
  p.num_slots = r.num_slots;
  p.hist = static_cast<const int32_t*>(hist.data_ptr());
  p.start = static_cast<const int32_t*>(start.data_ptr());
  p.flush = static_cast<const int8_t*>(flush.data_ptr());
  fill_ring(p, state, ring_x, ring_B, ring_dt, r.R);
  p.entries_vec_aligned = p.entries_vec_aligned && entries_vec_aligned({&x, &B}, d.P, d.N);
  p.mode = mamba2::ReplayMode::kOutputOnly;  // unused by the spec kernel
  p.act = to_dtype(x.scalar_type());
  sp.cu_seqlens = static_cast<const int32_t*>(cu_seqlens.data_ptr());
  sp.num_tokens = d.L;
  sp.max_tokens = static_cast<int32_t>(max_tokens);
  const CudaContext ctx(x);
  check_launch(op, mamba2::launch_spec_verify(sp, ctx.stream));
}

void mamba2_flush_cuda(Tensor A, Tensor slots, Tensor hist, Tensor start, Tensor state, Tensor ring_x, Tensor ring_B,
                       Tensor ring_dt, std::optional<int64_t> null_slot) {
  constexpr const char* op = "mamba2_flush";
  check_dtype(op, "A", A, {ScalarType::Float});
  check_shape(op, "A", A, {{"H", kAnySize}});
  const int64_t H = A.size(0);
  const int64_t batch = check_rows(op, slots, std::nullopt, kAnySize);
  const RingDims r = check_ring(op, ring_x, ring_B, ring_dt, state, nullptr, ScalarType::Float, H, kAnySize,
                                kAnySize, kAnySize);
  check_cursors(op, hist, start, std::nullopt, r.num_slots);
  check_layout_and_device(op, state, {{"state", &state}, {"ring_x", &ring_x}, {"ring_B", &ring_B}, {"ring_dt", &ring_dt}},
                          {{"A", &A}, {"slots", &slots}, {"hist", &hist}, {"start", &start}});
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_dstate(op, r.N);
  check_cuda_grid(op, batch, "A", H);

  mamba2::ReplayParams p{};
  p.layer = {static_cast<const float*>(A.data_ptr()), nullptr, nullptr, false};
  p.geo = geometry(H, r.P, r.N, r.G);
  p.slots = static_cast<const int32_t*>(slots.data_ptr());
  p.batch = static_cast<int32_t>(batch);
  p.null_slot = null;
  p.num_slots = r.num_slots;
  p.hist = static_cast<const int32_t*>(hist.data_ptr());
  p.start = static_cast<const int32_t*>(start.data_ptr());
  p.flush = nullptr;
  fill_ring(p, state, ring_x, ring_B, ring_dt, r.R);
  p.mode = mamba2::ReplayMode::kFold;
  p.act = to_dtype(ring_x.scalar_type());
  const CudaContext ctx(state);
  check_launch(op, mamba2::launch_replay(p, ctx.stream));
}

void mamba2_state_update_cuda(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, OptTensor D, OptTensor z,
                              OptTensor dt_bias, bool dt_softplus, Tensor slots, Tensor state, Tensor out,
                              OptTensor cu_seqlens, OptTensor snapshot_slots, std::optional<int64_t> null_slot) {
  constexpr const char* op = "mamba2_state_update";
  const char* lead = cu_seqlens ? "tokens" : "batch";
  const TokenDims d = check_token_inputs(op, x, dt, A, B, C, D, z, dt_bias, lead);
  // _check_state_update_rows.
  if (!cu_seqlens && snapshot_slots)
    fail(op, "snapshot_slots is given without cu_seqlens; it is only used by the varlen (spec) form");
  if (cu_seqlens && !snapshot_slots)
    fail(op, "cu_seqlens requires snapshot_slots (batch, T): the state after each token is written to its snapshot slot");
  const int64_t batch = check_rows(op, slots, cu_seqlens, cu_seqlens ? kAnySize : d.L);
  int64_t T = 1;
  if (snapshot_slots) {
    check_dtype(op, "snapshot_slots", *snapshot_slots, {ScalarType::Int});
    check_shape(op, "snapshot_slots", *snapshot_slots, {{"batch", batch}, {"T", kAnySize}});
    T = snapshot_slots->size(1);
  }
  check_dtype(op, "state", state, kStateDtypes);
  check_shape(op, "state", state, {{"slots", kAnySize}, {"H", d.H}, {"P", d.P}, {"N", d.N}});
  const int64_t num_slots = state.size(0);
  check_same_dtype(op, "out", out, "x", x.scalar_type());
  check_shape(op, "out", out, {{lead, d.L}, {"H", d.H}, {"P", d.P}});
  Named inner{{"x", &x}, {"dt", &dt}, {"B", &B}, {"C", &C}};
  add_opt(inner, "z", z);
  inner.insert(inner.end(), {{"out", &out}, {"state", &state}});
  Named dense{{"A", &A}};
  add_opt(dense, "D", D);
  add_opt(dense, "dt_bias", dt_bias);
  dense.emplace_back("slots", &slots);
  add_opt(dense, "cu_seqlens", cu_seqlens);
  add_opt(dense, "snapshot_slots", snapshot_slots);
  check_layout_and_device(op, x, inner, dense);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_dstate(op, d.N);
  check_cuda_grid(op, batch, "x", d.H);

  mamba2::StateUpdateParams p{};
  p.tok = token_inputs(x, dt, B, C, z, out);
  p.layer = layer_params(A, D, dt_bias, dt_softplus);
  p.geo = geometry(d.H, d.P, d.N, d.G);
  p.slots = static_cast<const int32_t*>(slots.data_ptr());
  p.batch = static_cast<int32_t>(batch);
  p.null_slot = null;
  p.num_slots = num_slots;
  p.state = state.mutable_data_ptr();
  p.state_stride = state.stride(0);
  p.state_vec_aligned = dim0_vec_aligned(state);  // else the state goes element-wise
  p.cu_seqlens = opt_ptr<int32_t>(cu_seqlens);
  p.snapshot_slots = opt_ptr<int32_t>(snapshot_slots);
  p.snapshot_stride = snapshot_slots ? snapshot_slots->stride(0) : 0;
  p.max_tokens = static_cast<int32_t>(T);
  p.act = to_dtype(x.scalar_type());
  p.state_dtype = to_dtype(state.scalar_type());
  const CudaContext ctx(x);
  check_launch(op, mamba2::launch_state_update(p, ctx.stream));
}

}  // namespace
}  // namespace replayssm::ops

STABLE_TORCH_LIBRARY_IMPL(replayssm, CUDA, m) {
  m.impl("mamba2_decode", TORCH_BOX(&replayssm::ops::mamba2_decode_cuda));
  m.impl("mamba2_spec_verify", TORCH_BOX(&replayssm::ops::mamba2_spec_verify_cuda));
  m.impl("mamba2_flush", TORCH_BOX(&replayssm::ops::mamba2_flush_cuda));
  m.impl("mamba2_state_update", TORCH_BOX(&replayssm::ops::mamba2_state_update_cuda));
}

#endif  // REPLAYSSM_WITH_CUDA
