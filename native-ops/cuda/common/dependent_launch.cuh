// Programmatic dependent launch (sm_90 and later): a kernel launched with
// launch_after_prerequisite() may be scheduled while the kernel before it on the stream is still
// finishing, so that its launch latency hides behind that kernel's tail instead of following it.
// Every block of such a kernel must call wait_for_prerequisite_grid() before it touches anything
// the previous kernel writes, and on every path: a block that returned without waiting could let
// the kernel complete before its prerequisite, and the work after it on the stream (a caching
// allocator's reuse of the scratch included) would no longer be ordered after the prerequisite.
// The previous kernel may call allow_dependent_launch() once its remaining work is short.
//
// Code compiled for an architecture before sm_90 has no such calls (they compile to nothing),
// and launch_after_prerequisite() then launches plainly: it asks the loaded code, not only the
// device.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
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

// Launches kKernel on `stream` as a programmatic dependent of the stream's previous kernel where
// that is safe, plainly otherwise, and checks the launch. Safe means the device runs it (compute
// capability 9.0 or later) and the code loaded for the device has the wait in it: code JIT-
// compiled from PTX of an older virtual architecture (a build for `80` only, run on an H100)
// has the wait compiled out, and such a kernel must not be launched early. The kernel is a
// template parameter so that each kernel caches its own answer per device.
template <auto kKernel, typename... Args>
void launch_after_prerequisite(const char* name, dim3 grid, dim3 block, size_t smem_bytes,
                               cudaStream_t stream, int device, Args&&... args) {
  constexpr int kMaxDevices = 64;
  // 0 = not yet asked, 1 = plain, 2 = dependent. Racing threads store the same answer.
  static std::atomic<int> mode[kMaxDevices];
  int m = device >= 0 && device < kMaxDevices ? mode[device].load() : 0;
  if (m == 0) {
    cudaFuncAttributes attributes{};
    DJL_ATTN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kKernel));
    m = device_facts(device).cc_major >= 9 && attributes.ptxVersion >= 90 ? 2 : 1;
    if (device >= 0 && device < kMaxDevices) mode[device].store(m);
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = m == 2 ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kKernel, std::forward<Args>(args)...);
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail_native("launch of ", name, " failed: ", cudaGetErrorString(status));
  }
}

}  // namespace djl_attn::cuda
