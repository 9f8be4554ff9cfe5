"""The floor of a batch-1 Mamba-2 decode launch: probe kernels that do only a step's dependent
memory round trips, timed the way the benchmark times our kernels (CUDA-graph replay, cold cache
sets rotated, programmatic dependent launch as our launches use it).

Every probe runs nano's batch-1 grid (5 chunks of 16 rows x 96 heads = 480 CTAs of 128 threads;
a lane holds 4 of a row's 128 fp32 state columns) and ends with one store of the CTA's 16 outputs.
What differs is the chain of loads before that store:

    empty       no load (the launch and the store alone)
    slot        slot id -> store
    read        slot id -> the CTA's 16 state rows (8 KiB) -> S.C per row -> store
    read_write  as read, and the rows written back (the classic step's traffic)
    cursor      slot id -> cursors[slot] -> one ring entry at the cursor, and the state rows after
                the slot -> store (the replay step's shortest chain: slot, cursors, entries)
    ring_all    slot id -> cursors[slot] and all R = 16 ring entries by physical position, with
                the state rows, all after the slot -> store (the entries no longer wait for the
                cursors; one head's ring is as many bytes as the CTA's state rows)

It answers how much of our kernels' batch-1 time any kernel with these round trips pays on this
GPU, so what is left is ours. The probes are measurement tools, not library code, and are
compiled here with torch's cpp_extension (about a minute).

    python bench/latency_floor.py [--sets 64] [--pdl 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root holds the package
from replayssm_ext.benchmark import Timer  # noqa: E402

H, P, N, ROWS, R = 96, 80, 128, 16, 16  # nano; 16-row chunks as choose_p_chunk takes at batch 1
KINDS = ["empty", "slot", "read", "read_write", "cursor", "ring_all"]

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

namespace {
enum Kind { kEmpty = 0, kSlot, kRead, kReadWrite, kCursor, kRingAll };
constexpr int kRing = 16;  // R, the ring's physical entries (B = 16)

// The state rows and ring entries travel by cp.async into this lane's own shared-memory slots,
// so all of a probe's copies are in flight at once whatever ptxas schedules (register loads it
// consumes early to save registers, and a later load then waits for an earlier one: a round
// trip the probe does not mean). The slot and cursor are plain loads, which the chain needs.
__device__ __forceinline__ void copy16(float4* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void copies_land() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid (P / 16, H, 1), 128 threads: warp w holds rows 4w..4w+3 of the chunk, lane l columns 4l..4l+3.
template <int K>
__global__ void __launch_bounds__(128) probe(const int* slots, const int* cursors, float* state, const float* ring,
                                             const float* C, float* out, int H, int P) {
  constexpr int N = 128;
  __shared__ float4 rows_s[4][128], ring_s[4][128];  // [u][thread]: each lane reads back only its own
  // No __restrict__ on the pointers: with it the compiler may hoist the slot's load above the
  // wait for the previous grid, which our kernels never do.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int chunk = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const float4 c = reinterpret_cast<const float4*>(C + h * N)[lane];
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (K >= kSlot) {
    const int slot = slots[0];
    if constexpr (K == kSlot) {
      acc[0] = static_cast<float>(slot);
    } else {
      float* S = state + (static_cast<long long>(slot) * H + h) * P * N + static_cast<long long>(chunk * 16) * N;
#pragma unroll
      for (int u = 0; u < 4; ++u) copy16(&rows_s[u][tid], S + (warp * 4 + u) * N + 4 * lane);
      const float* ring_h = ring + (static_cast<long long>(slot) * H + h) * kRing * N;
      if constexpr (K == kRingAll) {
        // The ring of one head (16 entries x 128 columns) is as large as the CTA's state rows:
        // warp w copies entries 4w..4w+3 as it copies its state rows, before the cursor is known.
#pragma unroll
        for (int u = 0; u < 4; ++u) copy16(&ring_s[u][tid], ring_h + (warp * 4 + u) * N + 4 * lane);
      }
      float extra = 0.f;
      if constexpr (K == kCursor) {
        const int cur = cursors[slot];
        copy16(&ring_s[0][tid], ring_h + cur * N + 4 * lane);  // the entry waits for the cursor
      }
      const int cur = K == kRingAll ? cursors[slot] : 0;
      copies_land();
      if constexpr (K == kCursor) extra = dot4(ring_s[0][tid], c);
      if constexpr (K == kRingAll) {
#pragma unroll
        for (int u = 0; u < 4; ++u) extra += warp * 4 + u < cur ? dot4(ring_s[u][tid], c) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float4 v = rows_s[u][tid];
        acc[u] = dot4(v, c) + extra;
        if constexpr (K == kReadWrite)
          reinterpret_cast<float4*>(S + (warp * 4 + u) * N)[lane] = make_float4(0.9f * v.x, 0.9f * v.y, 0.9f * v.z, 0.9f * v.w);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const float v = warp_sum(acc[u]);
    if (lane == 0) out[h * P + chunk * 16 + warp * 4 + u] = v;
  }
}

template <int K>
void launch_one(const torch::Tensor& slots, const torch::Tensor& cursors, torch::Tensor& state, const torch::Tensor& ring,
                const torch::Tensor& C, torch::Tensor& out, int64_t set, bool pdl) {
  const int Hh = state.size(1), Pp = state.size(2), Nn = state.size(3), Rr = ring.size(2);
  TORCH_CHECK(Rr == kRing && Nn == 128 && Pp % 16 == 0, "probe: ring of ", kRing, " entries, N = 128, P a multiple of 16");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(Pp / 16, Hh, 1);
  cfg.blockDim = dim3(128);
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, probe<K>, slots.data_ptr<int>() + set, cursors.data_ptr<int>(),
                                             state.data_ptr<float>(), ring.data_ptr<float>(), C.data_ptr<float>(),
                                             out.data_ptr<float>(), Hh, Pp);
  TORCH_CHECK(err == cudaSuccess, "probe launch: ", cudaGetErrorString(err));
}
}  // namespace

void launch_probe(int64_t kind, torch::Tensor slots, torch::Tensor cursors, torch::Tensor state, torch::Tensor ring,
                  torch::Tensor C, torch::Tensor out, int64_t set, bool pdl) {
  switch (kind) {
    case kEmpty: return launch_one<kEmpty>(slots, cursors, state, ring, C, out, set, pdl);
    case kSlot: return launch_one<kSlot>(slots, cursors, state, ring, C, out, set, pdl);
    case kRead: return launch_one<kRead>(slots, cursors, state, ring, C, out, set, pdl);
    case kReadWrite: return launch_one<kReadWrite>(slots, cursors, state, ring, C, out, set, pdl);
    case kCursor: return launch_one<kCursor>(slots, cursors, state, ring, C, out, set, pdl);
    case kRingAll: return launch_one<kRingAll>(slots, cursors, state, ring, C, out, set, pdl);
  }
  TORCH_CHECK(false, "launch_probe: kind must be 0..5, got ", kind);
}
"""
CPP_SRC = ("void launch_probe(int64_t kind, torch::Tensor slots, torch::Tensor cursors, torch::Tensor state, "
           "torch::Tensor ring, torch::Tensor C, torch::Tensor out, int64_t set, bool pdl);")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=64, help="cold cache sets rotated (64 x 3.9 MB of state)")
    ap.add_argument("--pdl", type=int, choices=(0, 1), default=1, help="launch with programmatic dependent launch")
    ap.add_argument("--target-ms", type=float, default=200.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("latency_floor: needs a CUDA device", file=sys.stderr)
        return 2
    ext = load_inline("replayssm_latency_probe", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["launch_probe"], extra_cuda_cflags=["-O3"], verbose=False)
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    n = args.sets
    state = torch.randn(n, H, P, N, device=dev, generator=gen)
    ring = torch.randn(n, H, R, N, device=dev, generator=gen)
    C = torch.randn(H, N, device=dev, generator=gen)
    slots = torch.randperm(n, device=dev, generator=gen).to(torch.int32)
    cursors = torch.randint(0, R, (n,), device=dev, generator=gen, dtype=torch.int32)
    out = torch.empty(H * P, device=dev)
    timer = Timer(dev, use_graphs=True, target_s=args.target_ms * 1e-3, min_reps=10, max_reps=400, min_calls=n)
    rows = []
    print(f"{torch.cuda.get_device_name()}: {n} sets, pdl={args.pdl}, grid {P // 16}x{H} CTAs of 128 threads")
    for k, name in enumerate(KINDS):
        calls = [lambda s=s, k=k: ext.launch_probe(k, slots, cursors, state, ring, C, out, s, bool(args.pdl))
                 for s in range(n)]
        t = timer.time(calls)
        us, min_us = t.median_s * 1e6 / n, t.min_s * 1e6 / n  # Timing is per pass of the n launches
        rows.append(dict(kind=name, us=us, min_us=min_us, pdl=args.pdl, sets=n))
        print(f"  {name:<11} {us:7.2f} us per launch (min {min_us:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
