// The replay entries of one Mamba-2 row -- the ring's history, then the step's own tokens -- staged
// into shared memory with cp.async, and read back as fp32. Shared by the replay kernel and the
// spec kernel.
//
// Why cp.async: a CTA cannot start its per-row arithmetic before its entries arrive, and a loop of
// plain loads into shared memory waits one memory latency per iteration (about 16 dependent
// latencies for the B entries of a 16-entry history). Issued as cp.async they are all in flight
// together, alongside the first state loads. Measured on the H200 before this change: the
// non-flush decode step grew by ~16 us per history entry at batch 256 (docs/perf-notes.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/common/async_copy.cuh"
#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/common/cursor.h"
#include "replayssm/common/small_divisor.cuh"
#include "replayssm/mamba2/tile.cuh"

namespace replayssm::mamba2 {

// Where entry j of a row lives: j < hist is the ring entry at logical position j, j >= hist is
// token j - hist of the step's inputs. Both pointers are already offset to the first element
// wanted (the P chunk of x, or the group's B). The kernels have checked start < R and hist <= R,
// which ring_index_checked relies on.
template <typename Act>
struct EntryRows {
  const Act* ring;   // logical entry 0 is at ring + ring_index(start, 0, R) * ring_step
  int64_t ring_step;  // elements between ring entries
  const Act* tok;    // the first token's row
  int64_t tok_step;   // elements between tokens
  int hist, start, R;

  __device__ __forceinline__ const Act* row(int j) const {
    return j < hist ? ring + static_cast<int64_t>(ring_index_checked(start, j, R)) * ring_step : tok + (j - hist) * tok_step;
  }
};

// Copies `len` elements of entries 0 .. n_ent-1 to dst + j * ld. `vec` (every source row and dst
// row 16-byte aligned, len a whole number of 16-byte pieces) takes cp.async; the caller commits
// and waits. Otherwise element copies, for views the launcher found misaligned.
// kLen: len where the caller knows it at compile time (N, for the B rows), so that the flat index
// splits into (entry, piece) by a shift or a multiply; 0 where it is a run-time chunk length (the
// x rows), split by SmallDivisor: as an integer division by the run-time piece count it was about
// half of the vector path's ~54 SASS instructions per trip (sm_90a, session 70). Either way the
// flat index counts pieces or elements staged in shared memory, within SmallDivisor's range.
template <typename Act, int kThreads, bool kRolled = false, int kLen = 0>
__device__ __forceinline__ void stage_entries(Act* dst, int ld, const EntryRows<Act>& rows, int n_ent, int len, bool vec,
                                              int tid) {
  constexpr int kPer16 = 16 / static_cast<int>(sizeof(Act));
  if constexpr (kLen > 0) len = kLen;
  if (vec) {
    const int pieces = len / kPer16;
    const DivisorOf<kLen / kPer16> by_pieces(pieces);
    // The x rows' bases as values held across the loop: without the empty asm, ptxas formed the
    // ring's base again inside the loop's ring branch (~13 uniform-datapath instructions per trip,
    // sm_90a, the nine-CTA instance), which took back most of what the division saved. Not for
    // the B rows: held there too, the entries-first instances at N = 128 spilled 16-32 bytes.
    EntryRows<Act> at = rows;
    if constexpr (kLen == 0) asm volatile("" : "+l"(at.ring), "+l"(at.tok));
    for (int e = tid; e < n_ent * pieces; e += kThreads) {
      int c;
      const int j = by_pieces.divmod(e, &c);
      cp_async16(dst + j * ld + c * kPer16, at.row(j) + c * kPer16);
    }
  } else {
    // kRolled (the spec kernel): this path serves misaligned views only, and each unrolled copy (a
    // ring-index select, a 64-bit offset, a converted store) is code that shares the instruction
    // caches with the stream loop, which stalls on instruction fetch there (docs/perf-notes.md,
    // Mamba-2 spec verify, "Session 26"). The replay kernel keeps 4: rolled, ten of its N = 128
    // instances spilled 8-24 more bytes at their 64-register bound (sm_90a, ptxas).
    const DivisorOf<kLen> by_len(len);
#pragma unroll(kRolled ? 1 : 4)
    for (int e = tid; e < n_ent * len; e += kThreads) {
      int i;
      const int j = by_len.divmod(e, &i);
      dst[j * ld + i] = rows.row(j)[i];
    }
  }
}

// The inverse of stage_entries for a step's own tokens: rows 0 .. n-1 of src (row stride ld, `len`
// elements each) to the ring entries at logical hist .. hist+n-1 (ring_step elements apart). `vec`
// (the ring rows, the src rows and len in whole 16-byte pieces, as staged by stage_entries' vec
// path) copies 16 bytes at a time.
template <typename Act, int kThreads>
__device__ __forceinline__ void write_ring_entries(Act* ring, int64_t ring_step, const Act* src, int ld, int n, int len,
                                                   int hist, int start, int R, bool vec, int tid) {
  if (vec) {
    constexpr int kPer16 = 16 / static_cast<int>(sizeof(Act));
    const int pieces = len / kPer16;
    for (int e = tid; e < n * pieces; e += kThreads) {
      const int i = e / pieces, c = e - i * pieces;
      *reinterpret_cast<uint4*>(ring + ring_index_checked(start, hist + i, R) * ring_step + c * kPer16) =
          *reinterpret_cast<const uint4*>(src + i * ld + c * kPer16);
    }
  } else {
    for (int e = tid; e < n * len; e += kThreads) {
      const int i = e / len, c = e - i * len;
      ring[ring_index_checked(start, hist + i, R) * ring_step + c] = src[i * ld + c];
    }
  }
}

// The history's delta_j (fp32 in the ring) to dst[0 .. hist-1], by cp.async: one trip per thread
// for hist <= kThreads, so kRolled (as for stage_entries) loses nothing.
template <int kThreads, bool kRolled = false>
__device__ __forceinline__ void stage_ring_deltas(float* dst, const float* ring_dt, int hist, int start, int R, int tid) {
#pragma unroll(kRolled ? 1 : 4)
  for (int j = tid; j < hist; j += kThreads) cp_async4(dst + j, ring_dt + ring_index_checked(start, j, R));
}

// Sum of d[lo .. hi-1], in ascending order (a decay exponent over consecutive entries).
__device__ __forceinline__ float sum_entries(const float* d, int lo, int hi) {
  float s = 0.f;
  for (int m = lo; m < hi; ++m) s += d[m];
  return s;
}

// Shared-memory space for `count` values of T, in floats rounded up to 16 bytes.
__host__ __device__ inline int floats_for(int count, int elem_bytes) { return ((count * elem_bytes + 15) / 16) * 4; }

// Whether a kernel's fold reads its B_j from an fp32 copy in shared memory, converted once per CTA,
// rather than as staged (converting in every stream iteration): the copy was worth 658 -> 618 us
// on the nano flush step at B = 16 (H200), but it is R x N floats, and at B = 32 (16.9 KB) it held
// the replay kernel to 4 CTAs per SM where the non-flush rows of the same launch -- a read stream
// that needs CTAs in flight -- ran at 64 % of copy bandwidth. So the copy is made only when it
// costs no CTAs per SM (up to the kernel's register-bound target, min_ctas), and never for fp32
// activations, which are staged as fp32 already. Host and kernel compute the same.
__host__ __device__ inline bool fold_b_copy_pays(int floats_without_copy, int copy_floats, int act_bytes, int min_ctas) {
  if (act_bytes == 4) return false;
  const int with_copy = smem_ctas_per_sm((floats_without_copy + copy_floats) * 4);
  const int without = smem_ctas_per_sm(floats_without_copy * 4);
  return (with_copy < min_ctas ? with_copy : min_ctas) >= (without < min_ctas ? without : min_ctas);
}

}  // namespace replayssm::mamba2
