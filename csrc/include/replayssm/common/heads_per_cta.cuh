// How many heads one CTA streams (Mamba-2 heads of one group, GDN v-heads of one k-head): shared
// by the kernel families' launchers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "replayssm/common/cuda_utils.cuh"

namespace replayssm {

// What one launch offers the choice of heads per CTA.
struct HeadPairing {
  const char* env;        // the override's variable: REPLAYSSM_<KERNEL>_HEADS = 1, 2 (or 4 where quads exist)
  const char* err_value;  // the error for any other value
  const char* err_odd;    // the error for 2 where the heads sharing an input are odd
  bool even_heads;        // the heads that share an input (a group's, a k-head's) come in pairs
  bool whole_heads;       // one head would also be streamed whole by one CTA (no split of its rows)
  int64_t pair_ctas;      // CTAs of the launch with pairs
  int min_ctas;           // the kernel's CTAs per SM (its launch bound)
  int min_pair_ctas_per_sm;  // pairs only from this many pair CTAs per SM on (the family's measured bound)
  // nullptr where pair instances exist for this launch, else the error for an override of 2.
  const char* err_not_built = nullptr;
  // Four heads per CTA, where the family builds them (quads_built): nullptr where this launch can
  // take them, else the error for an override of 4; taken from min_quad_ctas_per_sm quad CTAs
  // (pair_ctas / 2) per SM on.
  bool quads_built = false;
  const char* err_quads = nullptr;
  int min_quad_ctas_per_sm = 0;
};

// Heads per CTA: 1, or 2 heads that share an input (B and C of a Mamba-2 group, k and q of a GDN
// k-head), which a CTA then loads and multiplies once for both. The kernels are issue-bound at
// serving batch, so the pair pays where it costs nothing else: whole heads, enough pair CTAs to
// keep every SM busy (min_pair_ctas_per_sm; below it, halving the CTAs leaves SMs short of work),
// and a pair's shared memory (smem_bytes(2)) fitting as many CTAs per SM as one head's
// (smem_bytes(1)). Where a pair fits fewer, it loses: GDN spec verify at T = 8, 3 -> 2 CTAs per SM,
// ran 10 % slower (H200, Qwen3.5-4B, batch 256). Four heads (where built) follow the same rule with
// their own bound on CTAs per SM, and are preferred to pairs where they qualify. The override (read
// at every launch, so the choices can be compared in one process) takes 2 or 4 at any batch and is
// an error where the heads do not divide so or no such instance exists; an empty value is no override.
template <typename SmemBytes>
const char* heads_per_cta(const HeadPairing& hp, SmemBytes smem_bytes, int* heads) {
  *heads = 1;
  if (const char* v = std::getenv(hp.env); v != nullptr && *v != '\0') {
    if (std::strcmp(v, "1") == 0) return nullptr;
    if (hp.quads_built && std::strcmp(v, "4") == 0) {
      if (hp.err_quads != nullptr) return hp.err_quads;
      *heads = 4;
      return nullptr;
    }
    if (std::strcmp(v, "2") != 0) return hp.err_value;
    if (hp.err_not_built != nullptr) return hp.err_not_built;
    if (!hp.even_heads) return hp.err_odd;
    *heads = 2;
    return nullptr;
  }
  if (hp.err_not_built != nullptr || !hp.even_heads || !hp.whole_heads) return nullptr;
  auto ctas_per_sm = [&](int h) {
    const int64_t fit = smem_ctas_per_sm(static_cast<int>(smem_bytes(h)));
    return fit < hp.min_ctas ? fit : static_cast<int64_t>(hp.min_ctas);
  };
  const int64_t sms = num_sms();
  if (hp.quads_built && hp.err_quads == nullptr && hp.pair_ctas / 2 >= hp.min_quad_ctas_per_sm * sms &&
      ctas_per_sm(4) >= ctas_per_sm(1)) {
    *heads = 4;
    return nullptr;
  }
  if (hp.pair_ctas < static_cast<int64_t>(hp.min_pair_ctas_per_sm) * sms) return nullptr;
  if (ctas_per_sm(2) >= ctas_per_sm(1)) *heads = 2;
  return nullptr;
}

}  // namespace replayssm
