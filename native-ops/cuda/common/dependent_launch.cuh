// Programmatic dependent launch (sm_90 and later): a kernel launched with
// launch_after_prerequisite() may be scheduled while the kernel before it on the stream is still
// finishing, so that its launch latency hides behind that kernel's tail instead of following it.
// Every block of such a kernel must call wait_for_prerequisite_grid() before it touches anything
// the previous kernel writes, and on every path: a block that returned without waiting could let
// the kernel complete before its prerequisite, and the work after it on the stream (a caching
// allocator's reuse of the scratch included) would no longer be ordered after the prerequisite.
// The previous kernel may call allow_dependent_launch() once its remaining work is short.
//
// On sm_80 the device calls compile to nothing and the host launches plainly.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/common/cuda_check.h"

namespace djl_attn::cuda {

// Blocks until the previous kernel on the stream has completed and its memory is visible.
// Returns at once in a kernel launched plainly.
__device__ __forceinline__ void wait_for_prerequisite_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel, if launched with launch_after_prerequisite(), be scheduled once every
// block of this one has called this or exited. Its writes stay ordered by its wait.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` on `stream` as a programmatic dependent of the stream's previous kernel on
// devices of compute capability 9.0 and later (plainly before), and checks the launch.
template <typename... KernelArgs, typename... Args>
void launch_after_prerequisite(const char* name, void (*kernel)(KernelArgs...), dim3 grid,
                               dim3 block, size_t smem_bytes, cudaStream_t stream, int device,
                               Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = device_facts(device).cc_major >= 9 ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail_native("launch of ", name, " failed: ", cudaGetErrorString(status));
  }
}

}  // namespace djl_attn::cuda
