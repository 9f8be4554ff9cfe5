// Programmatic dependent launch (Hopper and later): a kernel launched with it may be scheduled
// while the kernel before it in the stream is still running, so its launch latency overlaps that
// kernel's last wave instead of following it. At small batch a step's kernels run for a few
// microseconds each, so the gap between two launches, eager or in a CUDA graph, is a large share
// of a step.
//
// Ordering stays the stream's: every kernel of this library waits for the grids before it
// (griddepcontrol.wait: they have completed and their writes are visible) before its first access
// to global memory, and only then lets the next grid launch early (launch_dependents). Work before
// the wait is limited to what needs no memory: the CTA's registers, its index arithmetic and the
// kernel parameters. A kernel that follows ours without the launch attribute (any other library's)
// launches as it always does.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "replayssm/common/cuda_utils.cuh"

namespace replayssm {

// hold_before_wait's operand for one value: a pointer, or an integer or flag of 32 bits or less.
template <typename T>
__device__ __forceinline__ void hold_one(const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    asm volatile("" ::"l"(reinterpret_cast<unsigned long long>(v)));
  } else {
    static_assert(sizeof(T) <= 4, "hold_one: a pointer or a value of at most 32 bits");
    asm volatile("" ::"r"(static_cast<int>(v)));
  }
}

// Before any global memory access of every kernel of this library: its first statement, or the
// first after index arithmetic held by hold_before_wait (below).
__device__ __forceinline__ void await_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // Once every CTA of this grid has passed its wait, the next grid (if launched with the
  // attribute) may be scheduled; it waits in turn for this one to complete before reading.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Values formed before await_prior_grids (index arithmetic, addresses: nothing read from memory)
// held there: an empty volatile statement that takes them as operands, which the compiler keeps in
// order with the wait's, so the values are computed ahead of it rather than sunk to their first
// use behind it.
template <typename... Ts>
__device__ __forceinline__ void hold_before_wait(const Ts&... values) {
  (hold_one(values), ...);
}

// A launch site's choice: whether its kernel may be scheduled while the kernel before it runs.
// Every site of the library says kYes except two, measured on the H200 (fp32 checkpoint, bf16
// activations, B = 16, all drafts accepted, two rounds, us, attribute on -> off):
// - The per-draft snapshot state updates (the snapshot baselines of both families), launched back
//   to back, lose at small batch: Mamba-2 nano batch 1 T = 4 10.3 -> 8.7, T = 8 16.1 -> 13.3;
//   Qwen3.5-4B batch 8 T = 4 29.4 -> 26.2, T = 8 51.2 -> 44.3. They gain less where they gain at
//   all (Mamba-2 batch 8 T = 4 48.4 -> 49.4; Qwen batch 1 T = 4 6.2 -> 6.7), so they go without.
// - The Mamba-2 spec verify at batch 1 after the commit: T = 4 8.96 -> 8.64-8.73, T = 8 level
//   (11.64 / 11.63 -> 11.64 / 11.72). From batch 8 it gains (T = 4 23.6 -> 22.1, T = 8 36.3 ->
//   35.9), so only batch 1 goes without.
// Why those launches lose was not traced. REPLAYSSM_PDL overrides every site: 0 none, 1 all.
enum class EarlyLaunch : bool { kNo = false, kYes = true };

// Whether this launch carries the programmatic-serialization attribute: the site's choice unless
// REPLAYSSM_PDL is set (read at every launch, so the choices compare in one process). Any other
// value than 0 or 1 is an error.
inline const char* dependent_launch_choice(EarlyLaunch site, bool* on) {
  return env_forced_choice("REPLAYSSM_PDL", "REPLAYSSM_PDL must be 0 or 1", site == EarlyLaunch::kYes, true, true,
                           nullptr, nullptr, on);
}

// Launches `kernel` on `stream`, with programmatic dependent launch as dependent_launch_choice
// says for the site. Returns the environment error or the launch error's text, else nullptr.
template <typename... KernelArgs, typename... Args>
const char* launch_kernel(EarlyLaunch site, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, Args&&... args) {
  bool dependent = false;
  if (const char* err = dependent_launch_choice(site, &dependent)) return err;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = dependent ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so a later launch check does not report it
    return cudaGetErrorString(err);
  }
  return launch_status();
}

}  // namespace replayssm
