// Sums of M values over a group of kLanes adjacent lanes (a state row spread over a warp's lanes),
// all M at once, shared by the kernel families: one state row meets M vectors (Mamba-2's spec C_i,
// GDN's k_i and q_i of a window) while it is in registers, and each product's partial sums must
// be reduced over the row's lanes.
//
// M separate butterflies take M * log2(kLanes) shuffles; this takes about M + log2(kLanes). While a
// lane holds more than one value, each exchange halves them: the lane keeps the half its lane bit
// selects and adds its partner's partial of that half; the remaining levels are a plain butterfly.
// On return v[m], m < kept_sums<M>(), holds the group total of value first_sum<M>(lr) + m in every
// lane of the same lr / (lanes sharing it); the lanes with sum_holder<M>(lr) write it once.
//
// Each halving costs two selects per exchange (which half to send, which to keep) unless the lane
// already holds its values in the order that level wants: with kPresorted levels, the caller puts
// value m ^ first_sum<M>(lr)'s bits of those levels (presorted_mask) in v[m], and those levels send
// the upper half and keep the lower half in every lane. A kernel gets that order for free where the
// level's bit indexes operands it holds per lane anyway (Mamba-2's spec window tokens, whose C
// vectors are loaded once per CTA in the presorted order).
#pragma once

#include <cuda_runtime.h>

namespace replayssm {

// Over a warp: in lane j, the sum of x over the lanes i >= j (an inclusive suffix sum, five
// shuffles). Mamba-2's decay weights and GDN's history weights are its exclusive form, the caller
// passing lane j the value of entry j + 1.
__device__ __forceinline__ float warp_suffix_sum(float x, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float y = __shfl_down_sync(0xffffffffu, x, off);
    if (lane + off < 32) x += y;
  }
  return x;
}

template <int kLanes>
struct LaneSums {
  static_assert(kLanes > 0 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes: a power of two up to 32");

  template <int M>
  __host__ __device__ static constexpr int halvings() {
    int h = 0;
    while ((kLanes >> (h + 1)) > 0 && (M >> (h + 1)) > 0) ++h;
    return h;
  }
  template <int M>
  __host__ __device__ static constexpr int kept_sums() { return M >> halvings<M>(); }
  template <int M>
  __device__ __forceinline__ static int first_sum(int lr) {
    int first = 0;
#pragma unroll
    for (int s = 0; s < halvings<M>(); ++s)
      if (lr & (kLanes >> (s + 1))) first += M >> (s + 1);
    return first;
  }
  template <int M>
  __device__ __forceinline__ static bool sum_holder(int lr) { return lr % (kLanes >> halvings<M>()) == 0; }
  // The index bits the first kLevels halvings of M values select in lane lr (first_sum<M>'s part
  // from those levels): a presorted lane holds value m ^ presorted_mask in v[m].
  template <int M, int kLevels>
  __device__ __forceinline__ static int presorted_mask(int lr) {
    static_assert(kLevels >= 0 && kLevels <= halvings<M>(), "kLevels: at most the halvings of M values");
    int mask = 0;
#pragma unroll
    for (int s = 0; s < kLevels; ++s)
      if (lr & (kLanes >> (s + 1))) mask |= M >> (s + 1);
    return mask;
  }
  // lr: the lane's index within its group; the groups are aligned runs of kLanes lanes. The first
  // kPresorted halvings take v in presorted order (above); the result is the same either way.
  template <int M, int kPresorted = 0>
  __device__ __forceinline__ static void row_sums(float (&v)[M], int lr) {
    static_assert(M > 0 && (M & (M - 1)) == 0, "row_sums needs a power-of-two count");
    static_assert(kPresorted >= 0 && kPresorted <= halvings<M>(), "kPresorted: at most the halvings of M values");
    constexpr int kHalvings = halvings<M>();
    halve<M, 0, kPresorted>(v, lr);
#pragma unroll
    for (int off = kLanes >> (kHalvings + 1); off > 0; off >>= 1)
#pragma unroll
      for (int m = 0; m < kept_sums<M>(); ++m) v[m] += __shfl_xor_sync(0xffffffffu, v[m], off);
  }

 private:
  // Halving S (and the ones after it), each level a template instance so that its count is a
  // constant: with the count a function of a loop variable nvcc left the 8-wide first level of
  // 16 values as a loop over an indexed array in local memory (64-byte stack frame, STL / LDL).
  // A presorted level (S < kPresorted): the partner holds the same values in the mirrored order,
  // so v[m + half] is what it keeps and v[m] what this lane keeps, whichever half that is.
  template <int M, int S, int kPresorted>
  __device__ __forceinline__ static void halve(float (&v)[M], int lr) {
    if constexpr (S < halvings<M>()) {
      constexpr int off = kLanes >> (S + 1);
      constexpr int half = M >> (S + 1);
      const bool upper = (lr & off) != 0;
#pragma unroll
      for (int m = 0; m < half; ++m) {
        if constexpr (S < kPresorted) {
          v[m] += __shfl_xor_sync(0xffffffffu, v[m + half], off);
        } else {
          const float send = upper ? v[m] : v[m + half];
          const float keep = upper ? v[m + half] : v[m];
          v[m] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
      }
      halve<M, S + 1, kPresorted>(v, lr);
    }
  }
};

}  // namespace replayssm
