#include "cuda/common/cuda_check.h"

#include <array>
#include <atomic>

#include "shim/torch_shim.h"

namespace djl_attn::cuda {

DeviceGuard::DeviceGuard(int device) {
  DJL_ATTN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) DJL_ATTN_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  // A destructor must not throw; restoring can only fail if the context is already broken.
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
}

cudaStream_t current_stream(int device) {
  shim::GetCurrentCudaStream fn = shim::current_cuda_stream_fn();
  if (fn == nullptr) {
    fail_native("libtorch_cuda.so is not loaded in this process: CUDA tensors need a CUDA build "
                "of PyTorch");
  }
  void* stream = nullptr;
  if (fn(device, &stream) != 0) {
    fail_native("aoti_torch_get_current_cuda_stream(", device, ") failed");
  }
  return static_cast<cudaStream_t>(stream);
}

int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> counts{};
  if (device < 0 || device >= static_cast<int>(counts.size())) {
    fail_native("CUDA device index ", device, " out of the supported range [0, 64)");
  }
  int count = counts[device].load();
  if (count == 0) {
    DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    counts[device].store(count);
  }
  return count;
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  cudaPointerAttributes attributes{};
  DJL_ATTN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, src));
  DeviceGuard guard(attributes.device);
  cudaStream_t stream = current_stream(attributes.device);
  DJL_ATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  DJL_ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace djl_attn::cuda
