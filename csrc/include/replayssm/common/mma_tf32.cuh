// mma.sync m16n8k8 on tf32 operands with fp32 accumulators (sm_80 and later, so sm_90a and
// sm_100a), and the split of an fp32 value into two tf32 terms ("3xTF32"): x = big + small with
// big = x rounded to tf32 and small = the rest rounded to tf32. A product a.b taken as
// big.big + big.small + small.big drops only small.small (below 2^-22 of |a b|) and the small
// terms' own rounding (below 2^-22 as well), so a dot product keeps about fp32 accuracy on the
// tensor cores. Fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k8", .tf32):
// with g = lane / 4 and t = lane % 4, A register r holds row g + 8 (r % 2), column t + 4 (r / 2);
// B register r holds row (k) t + 4 r, column (n) g; accumulator r holds row g + 8 (r / 2),
// column 2 t + r % 2.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace replayssm {

// x rounded to the nearest tf32 (ties away from zero), as the 32-bit pattern mma reads.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// x = big + small up to the rounding of small to tf32 (below 2^-22 |x|); x - big is exact in fp32.
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}

// The same split in two instructions: small = x - big as an fp32 pattern, whose low 13 bits the
// mma ignores (it reads a tf32 operand's top 19 bits: small truncated, still below 2^-21 |x|).
__device__ __forceinline__ void split_tf32_trunc(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = __float_as_uint(x - __uint_as_float(big));
}

// acc (16 x 8, fp32) += A (16 x 8, tf32, row-major fragment) * B (8 x 8, tf32, column fragment).
__device__ __forceinline__ void mma_tf32_1688(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace replayssm
