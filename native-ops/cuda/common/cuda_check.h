// CUDA error checks, the device guard and PyTorch's current stream for CUDA operators.
#pragma once

#include <cuda_runtime.h>

#include "common/error.h"
#include "cuda/common/device_facts.h"

namespace djl_attn::cuda {

// Every CUDA runtime call goes through this: a failure becomes a NativeError naming the call.
// The runtime also keeps a failed call's status for the next cudaGetLastError(); it is read
// back here so that no error is left behind to be blamed on a later, unrelated launch (seen on
// the GPU machine: a failed cudaSetDevice resurfaced as the next test's launch failure).
#define DJL_ATTN_CUDA_CHECK(expr)                                                          \
  do {                                                                                     \
    cudaError_t djl_attn_status_ = (expr);                                                 \
    if (djl_attn_status_ != cudaSuccess) {                                                 \
      cudaGetLastError();                                                                  \
      ::djl_attn::fail_native(#expr, " failed: ", cudaGetErrorString(djl_attn_status_),    \
                              " (", __FILE__, ":", __LINE__, ")");                         \
    }                                                                                      \
  } while (0)

// Checks the launch just made (configuration errors surface here, not at the next sync);
// reading the status also clears it.
#define DJL_ATTN_CUDA_CHECK_LAUNCH(kernel_name)                                            \
  do {                                                                                     \
    cudaError_t djl_attn_status_ = cudaGetLastError();                                     \
    if (djl_attn_status_ != cudaSuccess) {                                                 \
      ::djl_attn::fail_native("launch of ", kernel_name, " failed: ",                      \
                              cudaGetErrorString(djl_attn_status_));                       \
    }                                                                                      \
  } while (0)

// Makes `device` current for its lifetime and restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The device whose memory `ptr` points into: where an operator's kernels launch. A null
// pointer (an empty tensor has none) gives the current device; host memory is an error.
int device_of(const void* ptr);

// PyTorch's current stream on `device` (torch.cuda.current_stream()), through the shim.
cudaStream_t current_stream(int device);

// Number of streaming multiprocessors of `device`, read once per device.
int multiprocessor_count(int device);

// The facts the launchers' plans read (SM count, opt-in shared memory, compute capability),
// queried once per device and cached.
const DeviceFacts& device_facts(int device);

// Copies device memory to the host on the current stream of the pointer's device, and waits.
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace djl_attn::cuda
