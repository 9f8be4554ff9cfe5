// Every op schema of torch.ops.replayssm, in one place. docs/contract.md says what each argument
// means; implementations register per backend next to their launchers (csrc/ops/*.cpp) and, for the
// CPU ops backed by the Python reference, in replayssm_ext/_cpu_ops.py.
#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY(replayssm, m) {
  // Cursors: once per model step, shared by every SSM layer of the model.
  m.def(
      "commit(Tensor slots, Tensor accepted, Tensor(a!) hist, Tensor(b!) start, Tensor(c!) flush, "
      "int hist_capacity, int max_tokens, int ring_len, int? null_slot=None) -> ()");
  m.def(
      "reset(Tensor slots, Tensor(a!) hist, Tensor(b!) start, Tensor(c!) flush, "
      "int hist_capacity, int max_tokens, int? null_slot=None) -> ()");

  // Mamba-2.
  m.def(
      "mamba2_decode(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
      "Tensor? dt_bias, bool dt_softplus, Tensor slots, Tensor hist, Tensor start, Tensor flush, "
      "Tensor(a!) state, Tensor(b!) ring_x, Tensor(c!) ring_B, Tensor(d!) ring_dt, Tensor(e!) out, "
      "str route=\"output_only\", int? null_slot=None) -> ()");
  m.def(
      "mamba2_spec_verify(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
      "Tensor? dt_bias, bool dt_softplus, Tensor cu_seqlens, Tensor slots, Tensor hist, Tensor start, "
      "Tensor flush, Tensor(a!) state, Tensor(b!) ring_x, Tensor(c!) ring_B, Tensor(d!) ring_dt, "
      "Tensor(e!) out, int max_tokens, int? null_slot=None) -> ()");
  m.def(
      "mamba2_flush(Tensor A, Tensor slots, Tensor hist, Tensor start, Tensor(a!) state, "
      "Tensor ring_x, Tensor ring_B, Tensor ring_dt, int? null_slot=None) -> ()");
  m.def(
      "mamba2_state_update(Tensor x, Tensor dt, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
      "Tensor? dt_bias, bool dt_softplus, Tensor slots, Tensor(a!) state, Tensor(b!) out, "
      "Tensor? cu_seqlens=None, Tensor? snapshot_slots=None, int? null_slot=None) -> ()");

  // Gated DeltaNet.
  m.def(
      "gdn_decode(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log, Tensor? dt_bias, "
      "float scale, bool qk_l2norm, Tensor slots, Tensor hist, Tensor start, Tensor flush, "
      "Tensor(a!) state, Tensor(b!) ring_u, Tensor(c!) ring_k, Tensor(d!) ring_g, Tensor(e!) out, "
      "int? null_slot=None) -> ()");
  m.def(
      "gdn_spec_verify(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log, Tensor? dt_bias, "
      "float scale, bool qk_l2norm, Tensor cu_seqlens, Tensor slots, Tensor hist, Tensor start, "
      "Tensor flush, Tensor(a!) state, Tensor(b!) ring_u, Tensor(c!) ring_k, Tensor(d!) ring_g, "
      "Tensor(e!) out, int max_tokens, int? null_slot=None) -> ()");
  m.def(
      "gdn_flush(Tensor slots, Tensor hist, Tensor start, Tensor(a!) state, Tensor ring_u, "
      "Tensor ring_k, Tensor ring_g, int? null_slot=None) -> ()");
  m.def(
      "gdn_state_update(Tensor q, Tensor k, Tensor v, Tensor a, Tensor b, Tensor A_log, "
      "Tensor? dt_bias, float scale, bool qk_l2norm, Tensor slots, Tensor(a!) state, Tensor(b!) out, "
      "Tensor? cu_seqlens=None, Tensor? snapshot_slots=None, int? null_slot=None) -> ()");
}
