// Quotient and remainder by a small run-time count, for loops that walk a flat index over (row,
// piece) pairs whose row length is known only at launch (a P chunk's 16-byte pieces, a head's
// tasks).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace replayssm {

// An integer division by a run-time divisor is about twenty-five SASS instructions on sm_90a (a
// reciprocal on the MUFU unit, then integer corrections and sign handling), and ptxas forms the
// reciprocal again in each unrolled copy of a loop: in the Mamba-2 replay kernel's x staging that
// was ~54 instructions per trip and thread, half of them the division (sm_90a SASS, session 70).
// Here the reciprocal is formed once (one MUFU instruction) and each division is one FFMA with a
// float conversion on either side.
//
// Exact for 0 <= e < 2^20 and d >= 1. rcp.approx is within one unit in the last place of 1 / d,
// and one FFMA rounds once, so the computed value is ((e + 0.5) / d) (1 + delta) with |delta| <
// 2^-22 + 2^-24; (e + 0.5) / d sits at least 0.5 / d from the integers around it, so truncation
// gives floor(e / d) while (e + 0.5) |delta| < 0.5, which e < 2^20 keeps. Checked with exact
// rationals for d = 1 .. 128, e < 2^14 and the 3000 values below 2^20, with the reciprocal two
// units off either way. The callers' e count pieces or elements staged in shared memory (228 KB
// per SM: e < 2^17).
__device__ __forceinline__ float approx_reciprocal(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

struct SmallDivisor {
  int d;
  float inv, half_inv;

  __device__ __forceinline__ explicit SmallDivisor(int divisor)
      : d(divisor), inv(approx_reciprocal(static_cast<float>(divisor))), half_inv(0.5f * inv) {}

  // e / d, with e % d in *rem.
  __device__ __forceinline__ int divmod(int e, int* rem) const {
    const int q = __float2int_rz(__fmaf_rn(__int2float_rn(e), inv, half_inv));
    *rem = e - q * d;
    return q;
  }
};

// The same interface for a divisor known at compile time (a shift or a multiply by ptxas), so
// that a loop can take either by a template argument.
template <int kDivisor>
struct FixedDivisor {
  static_assert(kDivisor >= 1, "a positive divisor");
  __device__ __forceinline__ explicit FixedDivisor(int) {}
  __device__ __forceinline__ int divmod(int e, int* rem) const {
    const int q = e / kDivisor;
    *rem = e - q * kDivisor;
    return q;
  }
};

// FixedDivisor<kDivisor> where kDivisor > 0, else SmallDivisor (the divisor given at run time).
template <int kDivisor>
using DivisorOf = std::conditional_t<(kDivisor > 0), FixedDivisor<(kDivisor > 0 ? kDivisor : 1)>, SmallDivisor>;

}  // namespace replayssm
