// The CTA of the small-batch rows kernels (warp_rows.cuh: the output-only decode; and
// state_update_rows.cuh: the classic step). Grid (P chunks, H, batch) as the other Mamba-2
// kernels; warp w holds rows 4w .. 4w + 3 of its chunk, lane l the state columns 4l .. 4l + 3 of
// each (N = 128: one fp32 16-byte vector per lane and row), and a LaneSums<32>::row_sums<4> over
// the warp's four rows leaves row r0 + l / 8's sum in lane l.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "replayssm/mamba2/params.h"

namespace replayssm::mamba2 {

struct RowsCta {
  static constexpr int kRowsPerWarp = 4;  // state rows per warp: a CTA covers kWarps * 4 rows of P
  static constexpr int kN = 128;          // dstate
  static constexpr int kCols = kN / 32;   // state columns per lane

  int chunk, h, row;  // the CTA's P chunk, head and batch row
  int g;              // the head's group (B, C)
  int p0, plen;       // the chunk's first row of P and its row count
  int warp, lane;
  int r0;             // the warp's first row in the chunk
  int own_row;        // the row whose sums this lane ends with (row_sums<4>)

  __device__ __forceinline__ RowsCta(const Geometry& geo, int p_chunk)
      : chunk(blockIdx.x),
        h(blockIdx.y),
        row(blockIdx.z),
        g(h / geo.heads_per_group),
        p0(chunk * p_chunk),
        plen(min(p_chunk, geo.P - p0)),
        warp(threadIdx.x >> 5),
        lane(threadIdx.x & 31),
        r0(warp * kRowsPerWarp),
        own_row(r0 + (lane >> 3)) {}
};

// The rows kernels are built for an fp32 state and dstate 128.
template <typename St, int N>
constexpr bool kRowsCtaBuilt = std::is_same_v<St, float> && N == RowsCta::kN;

}  // namespace replayssm::mamba2
