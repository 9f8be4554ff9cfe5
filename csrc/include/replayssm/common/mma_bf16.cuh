// The two tensor-core instructions of the bf16 folds: ldmatrix (shared memory -> mma fragments)
// and mma.sync m16n8k16 with fp32 accumulators (sm_80 and later, so sm_90a and sm_100a). Thin
// wrappers in the style of async_copy.cuh; the fragment layouts they produce are the PTX ISA's
// ("Matrix Fragments for mma.m16n8k16", "ldmatrix"), which the callers' comments refer to.
// CuTe's SM80 MMA and SM75 LDSM atoms issue the same two instructions; including their headers
// added ~4.4 s to the compile of each kernel file (measured with nvcc 13.0, one sm_90a target) and
// would make CUTLASS (whose pip package also pulls cuda-python and scipy) a build dependency.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace replayssm {

// Four 8x8 matrices of 16-bit elements, transposed on the way: lane i gives the address of row
// (i % 8) of matrix (i / 8) (16 contiguous bytes, 16-byte aligned); register m of lane (4 g + t)
// receives elements [2t][g] (low half) and [2t + 1][g] of matrix m.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// The same four matrices without the transpose: register m of lane (4 g + t) receives elements
// [g][2t] (low half) and [g][2t + 1] of matrix m.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// acc (16 x 8, fp32) += A (16 x 16, bf16, row-major fragment) * B (16 x 8, bf16, column fragment).
__device__ __forceinline__ void mma_bf16_16816(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values as two bf16 pairs, hi + lo, within 2^-17 of the pair (lo rounds what hi left):
// the first two terms of split_bf16x3, for an operand whose product may round.
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - __low2float(h), x1 - __high2float(h));
  memcpy(&hi, &h, 4);
  memcpy(&lo, &l, 4);
}

// Two fp32 values as three bf16 pairs whose sum is exactly the pair (hi + mid + lo == x: each term
// takes the next 8 significant bits, and fp32 has 24), so a bf16 product against an exact bf16
// operand loses nothing before the fp32 accumulation.
__device__ __forceinline__ void split_bf16x3(float x0, float x1, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float r0 = x0 - __low2float(h), r1 = x1 - __high2float(h);
  const __nv_bfloat162 m = __floats2bfloat162_rn(r0, r1);
  const __nv_bfloat162 l = __floats2bfloat162_rn(r0 - __low2float(m), r1 - __high2float(m));
  memcpy(&hi, &h, 4);
  memcpy(&mid, &m, 4);
  memcpy(&lo, &l, 4);
}

// The same splits, with the rounded halves read back from the packed word by one shift or mask
// each (`cvt.rn.bf16x2.f32` packs the pair; the values and the rounding are those above, bit for
// bit). Through __nv_bfloat162 and __low2float / __high2float nvcc spends two PRMT and two shifts
// per pair unpacking and repacking the halves (sm_90a). Which form a caller takes is measured, not
// assumed: these took 0.5-2.8 % off the GDN window kernel's T = 4 / 8 steps but made the Mamba-2
// tensor-core stream (common/mma_state_stream.cuh) 4 % slower at batch 1 / 8 (sessions 31-32), so
// that stream keeps the forms above; the GDN kernels alone take these (session 33: Qwen3.5-4B spec
// verify T = 4 batch 256 -1.4 %, the decode flush step -1.4 %).
__device__ __forceinline__ uint32_t pack_bf16x2_rn(float x0, float x1) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));  // the first source goes to the high half
  return r;
}
__device__ __forceinline__ float bf16x2_low(uint32_t p) { return __uint_as_float(p << 16); }
__device__ __forceinline__ float bf16x2_high(uint32_t p) { return __uint_as_float(p & 0xffff0000u); }

__device__ __forceinline__ void split_bf16x2_packed(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2_rn(x0, x1);
  lo = pack_bf16x2_rn(x0 - bf16x2_low(hi), x1 - bf16x2_high(hi));
}

__device__ __forceinline__ void split_bf16x3_packed(float x0, float x1, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  hi = pack_bf16x2_rn(x0, x1);
  const float r0 = x0 - bf16x2_low(hi), r1 = x1 - bf16x2_high(hi);
  mid = pack_bf16x2_rn(r0, r1);
  lo = pack_bf16x2_rn(r0 - bf16x2_low(mid), r1 - bf16x2_high(mid));
}

}  // namespace replayssm
