// CUDA commit / reset: one thread per row. Live slots are distinct within a call, so rows never
// touch the same cursor.
#include <cuda_runtime.h>

#include "replayssm/common/cuda_utils.cuh"
#include "replayssm/common/cursor_apply.h"
#include "replayssm/common/dependent_launch.cuh"
#include "replayssm/launch.h"

namespace replayssm {
namespace {

__global__ void commit_kernel(const CommitParams p) {
  await_prior_grids();
  const int32_t row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < p.batch) commit_row(p, row);
}

__global__ void reset_kernel(const ResetParams p) {
  await_prior_grids();
  const int32_t row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < p.batch) reset_row(p, row);
}

constexpr int kThreads = 256;

}  // namespace

const char* launch_commit(const CommitParams& p, void* stream) {
  if (p.batch == 0) return nullptr;
  return launch_kernel(EarlyLaunch::kYes, commit_kernel, dim3((p.batch + kThreads - 1) / kThreads), dim3(kThreads),
                       0, static_cast<cudaStream_t>(stream), p);
}

const char* launch_reset(const ResetParams& p, void* stream) {
  if (p.batch == 0) return nullptr;
  return launch_kernel(EarlyLaunch::kYes, reset_kernel, dim3((p.batch + kThreads - 1) / kThreads), dim3(kThreads),
                       0, static_cast<cudaStream_t>(stream), p);
}

}  // namespace replayssm
