// cp.async (global -> shared without passing through registers), shared by the kernel families.
// A loop of these issues every copy before any arrives, where a loop of plain loads into shared
// memory waits for each load in turn: the ring entries of a row come in about one memory latency.
// Also the small loads that must go out before a branch (load_s32_here).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace replayssm {

// 16 bytes; .cg keeps the data out of L1 (each ring entry is read by one CTA per step).
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem_src) : "memory");
}
// 8 bytes (.ca: the only form for copies under 16 bytes).
__device__ __forceinline__ void cp_async8(void* smem_dst, const void* gmem_src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(gmem_src) : "memory");
}
// 4 bytes (.ca, as above).
__device__ __forceinline__ void cp_async4(void* smem_dst, const void* gmem_src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(gmem_src) : "memory");
}
// Asks L2 to fetch `bytes` (a multiple of 16) from a 16-byte aligned global address: no register
// or shared-memory destination, so it costs the issuing thread nothing to wait for, and a later
// plain load of those bytes meets L2 instead of DRAM latency.
__device__ __forceinline__ void prefetch_l2_bulk(const void* gmem, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(gmem), "r"(bytes) : "memory");
#endif
}
// A 4-byte or 1-byte global load requested where it is written. ptxas moves a plain load down to
// its first use, past any early-exit branch in between (even one written as inline asm), so reads
// that do not depend on each other (a row's token range and its slot; a slot's cursors and the
// token count's check) go out one after another, a memory latency each. A relaxed load at GPU
// scope, a memory-model operation, stays where it is (sm_90a SASS, session 33), and volatile asm
// keeps the front end from moving it; its value is waited for at its first use, as for any load.
// It is served from L2, as a first read of these values is anyway.
__device__ __forceinline__ int32_t load_s32_here(const int32_t* gmem) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(gmem));
  return v;
}
__device__ __forceinline__ int32_t load_s8_here(const int8_t* gmem) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s8 %0, [%1];\n" : "=r"(v) : "l"(gmem));
  return v;
}
// An activation element (2 or 4 bytes: bf16, fp16, fp32) requested where it is written, for the
// same reason: a row's token inputs, which depend on its token range only, go out beside its
// cursors instead of after the branches that test them.
template <typename T>
__device__ __forceinline__ T load_elem_here(const T* gmem) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "load_elem_here: 2- or 4-byte elements");
  T v;
  if constexpr (sizeof(T) == 2) {
    unsigned short bits;
    asm volatile("ld.relaxed.gpu.global.b16 %0, [%1];\n" : "=h"(bits) : "l"(gmem));
    __builtin_memcpy(&v, &bits, 2);
  } else {
    uint32_t bits;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(bits) : "l"(gmem));
    __builtin_memcpy(&v, &bits, 4);
  }
  return v;
}
// kWords 32-bit words (2, 4 or 8: 8, 16 or 32 bytes, aligned to 8 / 16) requested where written,
// as load_s32_here; the words are kept as stored (the caller converts them at their first use).
template <int kWords>
__device__ __forceinline__ void load_words_here(const void* gmem, uint32_t (&w)[kWords]) {
  static_assert(kWords == 2 || kWords == 4 || kWords == 8, "load_words_here: 8, 16 or 32 bytes");
  if constexpr (kWords == 2) {
    asm volatile("ld.relaxed.gpu.global.v2.b32 {%0, %1}, [%2];\n" : "=r"(w[0]), "=r"(w[1]) : "l"(gmem));
  } else {
#pragma unroll
    for (int q = 0; q < kWords / 4; ++q)
      asm volatile("ld.relaxed.gpu.global.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(w[4 * q]), "=r"(w[4 * q + 1]), "=r"(w[4 * q + 2]), "=r"(w[4 * q + 3])
                   : "l"(static_cast<const char*>(gmem) + 16 * q));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace replayssm
