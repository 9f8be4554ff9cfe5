// Gated DeltaNet ops at the torch boundary (CUDA): validate, fill the params block, launch on the
// current stream. The checks and their wording follow replayssm_ext/_validate.py (the CPU and
// fake kernels' checks) in the same order, so every backend raises the same error; the value
// checks that need a host sync (slot range, cursor values) are not done here, and the kernels
// skip rows whose slot is not live. The CPU implementations are the Python reference
// (replayssm_ext/_cpu_ops.py).
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <string>

#include "checks.h"
#include "device.h"
#include "replayssm/gdn/launch.h"
#include "replayssm/gdn/params.h"

#ifdef REPLAYSSM_WITH_CUDA
namespace replayssm::ops {
namespace {

using gdn::DType;
using gdn::GdnParams;

constexpr std::initializer_list<ScalarType> kActDtypes = {ScalarType::BFloat16, ScalarType::Half, ScalarType::Float};
constexpr std::initializer_list<ScalarType> kStateDtypes = {ScalarType::Float, ScalarType::BFloat16, ScalarType::Half};

DType kernel_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return DType::kBF16;
    case ScalarType::Half: return DType::kF16;
    default: return DType::kF32;
  }
}

void check_divides(const char* op, const char* inner_name, int64_t inner, const char* outer_name, int64_t outer,
                   const char* what) {
  if (inner < 1 || outer % inner != 0)
    fail(op, std::string(outer_name) + "=" + std::to_string(outer) + " must be a multiple of " + inner_name + "=" +
                 std::to_string(inner) + " (" + what + ")");
}

void check_device_of(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> ts,
                     const Tensor& ref) {
  for (const auto& [name, t] : ts)
    if (t != nullptr) check_same_device(op, name, *t, ref);
}

// What the CUDA kernels need beyond the contract's shape rules: K = V in {64, 128, 256}, and
// 16-byte aligned rows (the kernels move 16 bytes per access; a packed q/k/v view at an odd
// offset would fault rather than be read wrong).
void check_cuda_geometry(const char* op, int64_t K, int64_t V) {
  if (K != V || (K != 64 && K != 128 && K != 256))
    fail(op, "the CUDA kernels need K = V in {64, 128, 256}, got K=" + std::to_string(K) + ", V=" + std::to_string(V));
}

void check_aligned(const char* op, const char* name, const Tensor& t) {
  const auto addr = reinterpret_cast<uintptr_t>(t.data_ptr());
  const int64_t row_bytes = t.dim() > 1 ? t.stride(0) * static_cast<int64_t>(t.element_size()) : 0;
  if (addr % 16 != 0 || (t.size(0) > 1 && row_bytes % 16 != 0))
    fail(op, std::string(name) + " must start on a 16-byte boundary and have a dim-0 stride of a multiple of 16 bytes "
                                 "(CUDA kernels), got address % 16 = " +
                 std::to_string(addr % 16) + ", dim-0 stride " + std::to_string(row_bytes) + " bytes");
}

struct TokenDims {
  int64_t L, H, K, HV, V;
};

// _check_gdn_token_inputs; lead names dim 0: "batch" (one token per row) or "tokens" (packed rows).
TokenDims check_token_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                             const Tensor& b, const Tensor& A_log, const std::optional<Tensor>& dt_bias,
                             const char* lead = "batch") {
  check_dtype(op, "q", q, kActDtypes);
  const ScalarType act = q.scalar_type();
  check_shape(op, "q", q, {{lead, kAnySize}, {"H", kAnySize}, {"K", kAnySize}});
  const int64_t L = q.size(0), H = q.size(1), K = q.size(2);
  check_same_dtype(op, "k", k, "q", act);
  check_shape(op, "k", k, {{lead, L}, {"H", H}, {"K", K}});
  check_same_dtype(op, "v", v, "q", act);
  check_shape(op, "v", v, {{lead, L}, {"HV", kAnySize}, {"V", kAnySize}});
  const int64_t HV = v.size(1), V = v.size(2);
  check_divides(op, "H", H, "HV", HV, "v heads per k head");
  check_same_dtype(op, "a", a, "q", act);
  check_shape(op, "a", a, {{lead, L}, {"HV", HV}});
  check_same_dtype(op, "b", b, "q", act);
  check_shape(op, "b", b, {{lead, L}, {"HV", HV}});
  check_dtype(op, "A_log", A_log, {ScalarType::Float});
  check_shape(op, "A_log", A_log, {{"HV", HV}});
  if (dt_bias.has_value()) {
    check_dtype(op, "dt_bias", *dt_bias, {ScalarType::Float});
    check_shape(op, "dt_bias", *dt_bias, {{"HV", HV}});
  }
  return {L, H, K, HV, V};
}

// _check_rows: slots (batch[=L]) int32, then (packed rows) cu_seqlens (batch+1) int32. Returns batch.
int64_t check_rows(const char* op, const Tensor& slots, int64_t batch,
                   const std::optional<Tensor>& cu_seqlens = std::nullopt) {
  check_dtype(op, "slots", slots, {ScalarType::Int});
  check_shape(op, "slots", slots, {{"batch", batch}});
  batch = slots.size(0);
  if (cu_seqlens.has_value()) {
    check_dtype(op, "cu_seqlens", *cu_seqlens, {ScalarType::Int});
    check_shape(op, "cu_seqlens", *cu_seqlens, {{"batch+1", batch + 1}});
  }
  return batch;
}

// _check_gdn_ring; act_ref is the tensor that fixed the act dtype (nullptr: ring_u fixes it).
// Returns (num_slots, R) and fills H / K / HV / V when they were not known (kAnySize).
std::pair<int64_t, int64_t> check_ring(const char* op, const Tensor& ring_u, const Tensor& ring_k,
                                       const Tensor& ring_g, const Tensor& state, const char* act_ref,
                                       std::optional<ScalarType> act, int64_t& H, int64_t& K, int64_t& HV,
                                       int64_t& V) {
  if (!act.has_value()) {
    check_dtype(op, "ring_u", ring_u, kActDtypes);
    act = ring_u.scalar_type();
    act_ref = "ring_u";
  } else {
    check_same_dtype(op, "ring_u", ring_u, act_ref, *act);
  }
  check_shape(op, "ring_u", ring_u, {{"slots", kAnySize}, {"HV", HV}, {"R", kAnySize}, {"V", V}});
  const int64_t num_slots = ring_u.size(0), R = ring_u.size(2);
  HV = ring_u.size(1);
  V = ring_u.size(3);
  check_same_dtype(op, "ring_k", ring_k, act_ref, *act);
  check_shape(op, "ring_k", ring_k, {{"slots", num_slots}, {"H", H}, {"R", R}, {"K", K}});
  H = ring_k.size(1);
  K = ring_k.size(3);
  check_divides(op, "H", H, "HV", HV, "v heads per k head");
  check_dtype(op, "ring_g", ring_g, {ScalarType::Float});
  check_shape(op, "ring_g", ring_g, {{"slots", num_slots}, {"HV", HV}, {"R", R}});
  check_dtype(op, "state", state, kStateDtypes);
  check_shape(op, "state", state, {{"slots", num_slots}, {"HV", HV}, {"V", V}, {"K", K}});
  return {num_slots, R};
}

void check_cursors(const char* op, const Tensor& hist, const Tensor& start, const Tensor* flush, int64_t num_slots) {
  check_dtype(op, "hist", hist, {ScalarType::Int});
  check_shape(op, "hist", hist, {{"slots", num_slots}});
  check_dtype(op, "start", start, {ScalarType::Int});
  check_shape(op, "start", start, {{"slots", num_slots}});
  if (flush != nullptr) {
    check_dtype(op, "flush", *flush, {ScalarType::Char});
    check_shape(op, "flush", *flush, {{"slots", num_slots}});
  }
}

void check_out(const char* op, const Tensor& out, ScalarType act, int64_t L, int64_t HV, int64_t V,
               const char* lead = "batch") {
  check_same_dtype(op, "out", out, "q", act);
  check_shape(op, "out", out, {{lead, L}, {"HV", HV}, {"V", V}});
}

// The spec-verify kernel keeps one correction u_i per window token in registers.
void check_cuda_max_tokens(const char* op, int64_t max_tokens) {
  if (max_tokens > 8) fail(op, "the CUDA kernels need max_tokens <= 8, got " + std::to_string(max_tokens));
}

void fill_tokens(GdnParams& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                 const Tensor& A_log, const std::optional<Tensor>& dt_bias, double scale, bool qk_l2norm,
                 const Tensor& out) {
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.q_row_stride = q.stride(0);
  p.k_row_stride = k.stride(0);
  p.v_row_stride = v.stride(0);
  p.a_row_stride = a.stride(0);
  p.b_row_stride = b.stride(0);
  p.A_log = A_log.const_data_ptr<float>();
  p.dt_bias = dt_bias.has_value() ? dt_bias->const_data_ptr<float>() : nullptr;
  p.scale = static_cast<float>(scale);
  p.qk_l2norm = qk_l2norm ? 1 : 0;
  p.out = out.data_ptr();
  p.out_row_stride = out.stride(0);
  p.act_dtype = kernel_dtype(q.scalar_type());
}

void fill_ring(GdnParams& p, const Tensor& state, const Tensor& ring_u, const Tensor& ring_k, const Tensor& ring_g,
               int64_t R) {
  p.state = state.data_ptr();
  p.state_slot_stride = state.stride(0);
  p.state_dtype = kernel_dtype(state.scalar_type());
  p.ring_u = ring_u.data_ptr();
  p.ring_k = ring_k.data_ptr();
  p.ring_g = ring_g.mutable_data_ptr<float>();
  p.ring_u_slot_stride = ring_u.stride(0);
  p.ring_k_slot_stride = ring_k.stride(0);
  p.ring_g_slot_stride = ring_g.stride(0);
  p.ring_len = static_cast<int32_t>(R);
}

void fill_rows(const char* op, GdnParams& p, const Tensor& slots, int64_t num_slots, int32_t null_slot, int64_t H,
               int64_t HV, int64_t K, int64_t V) {
  // The CUDA kernels' grid is (tiles, HV, batch): its y and z extents are at most 65535.
  if (slots.size(0) > 65535)
    fail(op, "slots: the CUDA kernels take at most 65535 rows, got " + std::to_string(slots.size(0)));
  if (HV > 65535) fail(op, "HV (value heads): the CUDA kernels take at most 65535, got " + std::to_string(HV));
  p.slots = slots.const_data_ptr<int32_t>();
  p.batch = static_cast<int32_t>(slots.size(0));
  p.null_slot = null_slot;
  p.num_slots = num_slots;
  p.H = static_cast<int32_t>(H);
  p.HV = static_cast<int32_t>(HV);
  p.K = static_cast<int32_t>(K);
  p.V = static_cast<int32_t>(V);
  p.tiles_per_head = 0;
}

void gdn_decode_cuda(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log, std::optional<Tensor> dt_bias,
                     double scale, bool qk_l2norm, Tensor slots, Tensor hist, Tensor start, Tensor flush,
                     Tensor state, Tensor ring_u, Tensor ring_k, Tensor ring_g, Tensor out,
                     std::optional<int64_t> null_slot) {
  constexpr const char* op = "gdn_decode";
  TokenDims d = check_token_inputs(op, q, k, v, a, b, A_log, dt_bias);
  check_rows(op, slots, d.L);
  const auto [num_slots, R] =
      check_ring(op, ring_u, ring_k, ring_g, state, "q", q.scalar_type(), d.H, d.K, d.HV, d.V);
  check_cursors(op, hist, start, &flush, num_slots);
  check_out(op, out, q.scalar_type(), d.L, d.HV, d.V);
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out},
                         {"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g}})
    check_inner_contiguous(op, name, *t);
  check_contiguous(op, "A_log", A_log);
  if (dt_bias.has_value()) check_contiguous(op, "dt_bias", *dt_bias);
  for (auto [name, t] : {std::pair{"slots", &slots}, {"hist", &hist}, {"start", &start}, {"flush", &flush}})
    check_contiguous(op, name, *t);
  check_device_of(op,
                  {{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out}, {"state", &state},
                   {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g}, {"A_log", &A_log},
                   {"dt_bias", dt_bias.has_value() ? &*dt_bias : nullptr}, {"slots", &slots}, {"hist", &hist},
                   {"start", &start}, {"flush", &flush}},
                  q);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_geometry(op, d.K, d.V);
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}})
    check_aligned(op, name, *t);

  GdnParams p{};
  fill_tokens(p, q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, out);
  fill_rows(op, p, slots, num_slots, null, d.H, d.HV, d.K, d.V);
  fill_ring(p, state, ring_u, ring_k, ring_g, R);
  p.hist = hist.const_data_ptr<int32_t>();
  p.start = start.const_data_ptr<int32_t>();
  p.flush = flush.const_data_ptr<int8_t>();
  const CudaContext ctx(q);
  check_launch(op, gdn::launch_gdn_decode(p, ctx.stream));
}

void gdn_spec_verify_cuda(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log,
                          std::optional<Tensor> dt_bias, double scale, bool qk_l2norm, Tensor cu_seqlens,
                          Tensor slots, Tensor hist, Tensor start, Tensor flush, Tensor state, Tensor ring_u,
                          Tensor ring_k, Tensor ring_g, Tensor out, int64_t max_tokens,
                          std::optional<int64_t> null_slot) {
  constexpr const char* op = "gdn_spec_verify";
  TokenDims d = check_token_inputs(op, q, k, v, a, b, A_log, dt_bias, "tokens");
  check_rows(op, slots, kAnySize, cu_seqlens);
  const auto [num_slots, R] =
      check_ring(op, ring_u, ring_k, ring_g, state, "q", q.scalar_type(), d.H, d.K, d.HV, d.V);
  check_cursors(op, hist, start, &flush, num_slots);
  check_out(op, out, q.scalar_type(), d.L, d.HV, d.V, "tokens");
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out},
                         {"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g}})
    check_inner_contiguous(op, name, *t);
  check_contiguous(op, "A_log", A_log);
  if (dt_bias.has_value()) check_contiguous(op, "dt_bias", *dt_bias);
  for (auto [name, t] : {std::pair{"slots", &slots}, {"cu_seqlens", &cu_seqlens}, {"hist", &hist},
                         {"start", &start}, {"flush", &flush}})
    check_contiguous(op, name, *t);
  check_device_of(op,
                  {{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out}, {"state", &state},
                   {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g}, {"A_log", &A_log},
                   {"dt_bias", dt_bias.has_value() ? &*dt_bias : nullptr}, {"slots", &slots},
                   {"cu_seqlens", &cu_seqlens}, {"hist", &hist}, {"start", &start}, {"flush", &flush}},
                  q);
  check_positive(op, "max_tokens", max_tokens);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_geometry(op, d.K, d.V);
  check_cuda_max_tokens(op, max_tokens);
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}})
    check_aligned(op, name, *t);

  GdnParams p{};
  fill_tokens(p, q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, out);
  fill_rows(op, p, slots, num_slots, null, d.H, d.HV, d.K, d.V);
  fill_ring(p, state, ring_u, ring_k, ring_g, R);
  p.cu_seqlens = cu_seqlens.const_data_ptr<int32_t>();
  p.max_tokens = static_cast<int32_t>(max_tokens);
  p.hist = hist.const_data_ptr<int32_t>();
  p.start = start.const_data_ptr<int32_t>();
  p.flush = flush.const_data_ptr<int8_t>();
  const CudaContext ctx(q);
  check_launch(op, gdn::launch_gdn_spec_verify(p, ctx.stream));
}

void gdn_flush_cuda(Tensor slots, Tensor hist, Tensor start, Tensor state, Tensor ring_u, Tensor ring_k,
                    Tensor ring_g, std::optional<int64_t> null_slot) {
  constexpr const char* op = "gdn_flush";
  check_dtype(op, "slots", slots, {ScalarType::Int});
  check_shape(op, "slots", slots, {{"batch", kAnySize}});
  int64_t H = kAnySize, K = kAnySize, HV = kAnySize, V = kAnySize;
  const auto [num_slots, R] = check_ring(op, ring_u, ring_k, ring_g, state, "ring_u", std::nullopt, H, K, HV, V);
  check_cursors(op, hist, start, nullptr, num_slots);
  for (auto [name, t] :
       {std::pair{"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g}})
    check_inner_contiguous(op, name, *t);
  for (auto [name, t] : {std::pair{"slots", &slots}, {"hist", &hist}, {"start", &start}})
    check_contiguous(op, name, *t);
  check_device_of(op,
                  {{"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}, {"ring_g", &ring_g},
                   {"slots", &slots}, {"hist", &hist}, {"start", &start}},
                  state);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_geometry(op, K, V);
  for (auto [name, t] : {std::pair{"state", &state}, {"ring_u", &ring_u}, {"ring_k", &ring_k}})
    check_aligned(op, name, *t);

  GdnParams p{};
  fill_rows(op, p, slots, num_slots, null, H, HV, K, V);
  fill_ring(p, state, ring_u, ring_k, ring_g, R);
  p.act_dtype = kernel_dtype(ring_u.scalar_type());
  p.hist = hist.const_data_ptr<int32_t>();
  p.start = start.const_data_ptr<int32_t>();
  const CudaContext ctx(state);
  check_launch(op, gdn::launch_gdn_flush(p, ctx.stream));
}

void gdn_state_update_cuda(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log,
                           std::optional<Tensor> dt_bias, double scale, bool qk_l2norm, Tensor slots, Tensor state,
                           Tensor out, std::optional<Tensor> cu_seqlens, std::optional<Tensor> snapshot_slots,
                           std::optional<int64_t> null_slot) {
  constexpr const char* op = "gdn_state_update";
  const char* lead = cu_seqlens.has_value() ? "tokens" : "batch";
  TokenDims d = check_token_inputs(op, q, k, v, a, b, A_log, dt_bias, lead);
  // _check_state_update_rows.
  if (!cu_seqlens.has_value() && snapshot_slots.has_value())
    fail(op, "snapshot_slots is given without cu_seqlens; it is only used by the varlen (spec) form");
  if (cu_seqlens.has_value() && !snapshot_slots.has_value())
    fail(op, "cu_seqlens requires snapshot_slots (batch, T): the state after each token is written to its snapshot slot");
  const int64_t batch = check_rows(op, slots, cu_seqlens.has_value() ? kAnySize : d.L, cu_seqlens);
  int64_t T = 1;
  if (snapshot_slots.has_value()) {
    check_dtype(op, "snapshot_slots", *snapshot_slots, {ScalarType::Int});
    check_shape(op, "snapshot_slots", *snapshot_slots, {{"batch", batch}, {"T", kAnySize}});
    T = snapshot_slots->size(1);
  }
  check_dtype(op, "state", state, kStateDtypes);
  check_shape(op, "state", state, {{"slots", kAnySize}, {"HV", d.HV}, {"V", d.V}, {"K", d.K}});
  const int64_t num_slots = state.size(0);
  check_out(op, out, q.scalar_type(), d.L, d.HV, d.V, lead);
  for (auto [name, t] :
       {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out}, {"state", &state}})
    check_inner_contiguous(op, name, *t);
  check_contiguous(op, "A_log", A_log);
  if (dt_bias.has_value()) check_contiguous(op, "dt_bias", *dt_bias);
  check_contiguous(op, "slots", slots);
  if (cu_seqlens.has_value()) check_contiguous(op, "cu_seqlens", *cu_seqlens);
  if (snapshot_slots.has_value()) check_contiguous(op, "snapshot_slots", *snapshot_slots);
  check_device_of(op,
                  {{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out}, {"state", &state},
                   {"A_log", &A_log}, {"dt_bias", dt_bias.has_value() ? &*dt_bias : nullptr}, {"slots", &slots},
                   {"cu_seqlens", cu_seqlens.has_value() ? &*cu_seqlens : nullptr},
                   {"snapshot_slots", snapshot_slots.has_value() ? &*snapshot_slots : nullptr}},
                  q);
  const int32_t null = null_slot_value(op, null_slot);
  check_cuda_geometry(op, d.K, d.V);
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"state", &state}}) check_aligned(op, name, *t);

  GdnParams p{};
  fill_tokens(p, q, k, v, a, b, A_log, dt_bias, scale, qk_l2norm, out);
  fill_rows(op, p, slots, num_slots, null, d.H, d.HV, d.K, d.V);
  p.state = state.data_ptr();
  p.state_slot_stride = state.stride(0);
  p.state_dtype = kernel_dtype(state.scalar_type());
  p.ring_len = 0;
  if (cu_seqlens.has_value()) {  // the snapshot form (spec baseline)
    p.cu_seqlens = cu_seqlens->const_data_ptr<int32_t>();
    p.snapshot_slots = snapshot_slots->const_data_ptr<int32_t>();
    p.snapshot_stride = snapshot_slots->stride(0);
  }
  p.max_tokens = static_cast<int32_t>(T);
  const CudaContext ctx(q);
  check_launch(op, gdn::launch_gdn_state_update(p, ctx.stream));
}

}  // namespace
}  // namespace replayssm::ops

STABLE_TORCH_LIBRARY_IMPL(replayssm, CUDA, m) {
  m.impl("gdn_decode", TORCH_BOX(&replayssm::ops::gdn_decode_cuda));
  m.impl("gdn_spec_verify", TORCH_BOX(&replayssm::ops::gdn_spec_verify_cuda));
  m.impl("gdn_flush", TORCH_BOX(&replayssm::ops::gdn_flush_cuda));
  m.impl("gdn_state_update", TORCH_BOX(&replayssm::ops::gdn_state_update_cuda));
}
#endif
