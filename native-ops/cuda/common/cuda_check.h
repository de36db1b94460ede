// CUDA error checks, the device guard and PyTorch's current stream for CUDA operators.
#pragma once

#include <cuda_runtime.h>

#include "common/error.h"

namespace djl_attn::cuda {

// Every CUDA runtime call goes through this: a failure becomes a NativeError naming the call.
#define DJL_ATTN_CUDA_CHECK(expr)                                                          \
  do {                                                                                     \
    cudaError_t djl_attn_status_ = (expr);                                                 \
    if (djl_attn_status_ != cudaSuccess) {                                                 \
      ::djl_attn::fail_native(#expr, " failed: ", cudaGetErrorString(djl_attn_status_),    \
                              " (", __FILE__, ":", __LINE__, ")");                         \
    }                                                                                      \
  } while (0)

// Checks the launch just made (configuration errors surface here, not at the next sync).
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

// PyTorch's current stream on `device` (torch.cuda.current_stream()), through the shim.
cudaStream_t current_stream(int device);

// Number of streaming multiprocessors of `device`, read once per device.
int multiprocessor_count(int device);

// Copies device memory to the host on the current stream of the pointer's device, and waits.
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace djl_attn::cuda
