// commit / reset at the torch boundary: validate, fill the params block, run the shared row
// functions (cursor_apply.h) on the CPU or launch them on the current CUDA stream.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "checks.h"
#include "device.h"
#include "replayssm/common/cursor_apply.h"
#include "replayssm/launch.h"

namespace replayssm::ops {
namespace {

struct CursorArgs {
  int64_t num_slots;
  int64_t batch;
};

CursorArgs check_cursor_args(const char* op, const Tensor& slots, const Tensor& hist, const Tensor& start,
                             const Tensor& flush, int64_t hist_capacity, int64_t max_tokens) {
  check_dtype(op, "slots", slots, {ScalarType::Int});
  check_dtype(op, "hist", hist, {ScalarType::Int});
  check_dtype(op, "start", start, {ScalarType::Int});
  check_dtype(op, "flush", flush, {ScalarType::Char});
  check_shape(op, "slots", slots, {{"batch", kAnySize}});
  check_shape(op, "hist", hist, {{"slots", kAnySize}});
  const int64_t num_slots = hist.size(0);
  check_shape(op, "start", start, {{"slots", num_slots}});
  check_shape(op, "flush", flush, {{"slots", num_slots}});
  for (auto [name, t] : {std::pair{"slots", &slots}, {"hist", &hist}, {"start", &start}, {"flush", &flush}})
    check_contiguous(op, name, *t);
  check_same_device(op, "slots", slots, hist);
  check_same_device(op, "start", start, hist);
  check_same_device(op, "flush", flush, hist);
  check_positive(op, "max_tokens", max_tokens);
  if (hist_capacity < max_tokens)
    fail(op, "hist_capacity (B) must be >= max_tokens (T), got B=" + std::to_string(hist_capacity) +
                 ", T=" + std::to_string(max_tokens));
  return {num_slots, slots.size(0)};
}

// Host-side value checks (CPU tensors only): slot range, distinct live slots.
void check_slot_values(const char* op, const int32_t* slots, int64_t batch, int64_t num_slots, int32_t null_slot) {
  std::vector<int64_t> seen_at(num_slots, -1);
  for (int64_t r = 0; r < batch; ++r) {
    const int32_t s = slots[r];
    if (s == kPadSlot || s == null_slot) continue;
    if (s < 0 || s >= num_slots)
      fail(op, "slots[" + std::to_string(r) + "] must be in [0, " + std::to_string(num_slots) +
                   ") or a padding id (-1" + (null_slot >= 0 ? ", " + std::to_string(null_slot) : std::string()) +
                   "), got " + std::to_string(s));
    if (seen_at[s] >= 0)
      fail(op, "slots must be distinct among live rows, slot " + std::to_string(s) + " appears at rows " +
                   std::to_string(seen_at[s]) + " and " + std::to_string(r));
    seen_at[s] = r;
  }
}

CursorRefs cursor_refs(const Tensor& hist, const Tensor& start, const Tensor& flush) {
  return {hist.mutable_data_ptr<int32_t>(), start.mutable_data_ptr<int32_t>(), flush.mutable_data_ptr<int8_t>()};
}

CommitParams make_commit_params(const char* op, const Tensor& slots, const Tensor& accepted, const Tensor& hist,
                                const Tensor& start, const Tensor& flush, int64_t hist_capacity,
                                int64_t max_tokens, int64_t ring_len, std::optional<int64_t> null_slot) {
  const CursorArgs a = check_cursor_args(op, slots, hist, start, flush, hist_capacity, max_tokens);
  check_dtype(op, "accepted", accepted, {ScalarType::Int});
  check_shape(op, "accepted", accepted, {{"batch", a.batch}});
  check_contiguous(op, "accepted", accepted);
  check_same_device(op, "accepted", accepted, hist);
  if (ring_len < hist_capacity + max_tokens)
    fail(op, "ring_len (R) must be >= hist_capacity + max_tokens = " + std::to_string(hist_capacity + max_tokens) +
                 ", got " + std::to_string(ring_len));
  CommitParams p{};
  p.slots = slots.const_data_ptr<int32_t>();
  p.accepted = accepted.const_data_ptr<int32_t>();
  p.cursor = cursor_refs(hist, start, flush);
  p.batch = static_cast<int32_t>(a.batch);
  p.num_slots = a.num_slots;
  p.hist_capacity = static_cast<int32_t>(hist_capacity);
  p.max_tokens = static_cast<int32_t>(max_tokens);
  p.ring_len = static_cast<int32_t>(ring_len);
  p.null_slot = null_slot_value(op, null_slot);
  return p;
}

ResetParams make_reset_params(const char* op, const Tensor& slots, const Tensor& hist, const Tensor& start,
                              const Tensor& flush, int64_t hist_capacity, int64_t max_tokens,
                              std::optional<int64_t> null_slot) {
  const CursorArgs a = check_cursor_args(op, slots, hist, start, flush, hist_capacity, max_tokens);
  ResetParams p{};
  p.slots = slots.const_data_ptr<int32_t>();
  p.cursor = cursor_refs(hist, start, flush);
  p.batch = static_cast<int32_t>(a.batch);
  p.num_slots = a.num_slots;
  p.hist_capacity = static_cast<int32_t>(hist_capacity);
  p.max_tokens = static_cast<int32_t>(max_tokens);
  p.null_slot = null_slot_value(op, null_slot);
  return p;
}

void commit_cpu(Tensor slots, Tensor accepted, Tensor hist, Tensor start, Tensor flush, int64_t hist_capacity,
                int64_t max_tokens, int64_t ring_len, std::optional<int64_t> null_slot) {
  constexpr const char* op = "commit";
  const CommitParams p = make_commit_params(op, slots, accepted, hist, start, flush, hist_capacity, max_tokens,
                                            ring_len, null_slot);
  check_slot_values(op, p.slots, p.batch, p.num_slots, p.null_slot);
  for (int32_t r = 0; r < p.batch; ++r) {
    if (!slot_is_live(p.slots[r], p.null_slot, p.num_slots)) continue;
    if (p.accepted[r] < 1 || p.accepted[r] > p.max_tokens)
      fail(op, "accepted[" + std::to_string(r) + "] must be in [1, max_tokens=" + std::to_string(p.max_tokens) +
                   "], got " + std::to_string(p.accepted[r]));
  }
  for (int32_t r = 0; r < p.batch; ++r) commit_row(p, r);
}

void reset_cpu(Tensor slots, Tensor hist, Tensor start, Tensor flush, int64_t hist_capacity, int64_t max_tokens,
               std::optional<int64_t> null_slot) {
  constexpr const char* op = "reset";
  const ResetParams p = make_reset_params(op, slots, hist, start, flush, hist_capacity, max_tokens, null_slot);
  check_slot_values(op, p.slots, p.batch, p.num_slots, p.null_slot);
  for (int32_t r = 0; r < p.batch; ++r) reset_row(p, r);
}

#ifdef REPLAYSSM_WITH_CUDA
void commit_cuda(Tensor slots, Tensor accepted, Tensor hist, Tensor start, Tensor flush, int64_t hist_capacity,
                 int64_t max_tokens, int64_t ring_len, std::optional<int64_t> null_slot) {
  constexpr const char* op = "commit";
  const CommitParams p = make_commit_params(op, slots, accepted, hist, start, flush, hist_capacity, max_tokens,
                                            ring_len, null_slot);
  const CudaContext ctx(hist);
  check_launch(op, launch_commit(p, ctx.stream));
}

void reset_cuda(Tensor slots, Tensor hist, Tensor start, Tensor flush, int64_t hist_capacity, int64_t max_tokens,
                std::optional<int64_t> null_slot) {
  constexpr const char* op = "reset";
  const ResetParams p = make_reset_params(op, slots, hist, start, flush, hist_capacity, max_tokens, null_slot);
  const CudaContext ctx(hist);
  check_launch(op, launch_reset(p, ctx.stream));
}
#endif

}  // namespace
}  // namespace replayssm::ops

STABLE_TORCH_LIBRARY_IMPL(replayssm, CPU, m) {
  m.impl("commit", TORCH_BOX(&replayssm::ops::commit_cpu));
  m.impl("reset", TORCH_BOX(&replayssm::ops::reset_cpu));
}

#ifdef REPLAYSSM_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(replayssm, CUDA, m) {
  m.impl("commit", TORCH_BOX(&replayssm::ops::commit_cuda));
  m.impl("reset", TORCH_BOX(&replayssm::ops::reset_cuda));
}
#endif
