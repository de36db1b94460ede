#include "cuda/common/cuda_check.h"

#include "cuda/common/scratch.h"

#include <array>
#include <atomic>
#include <mutex>

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

int device_of(const void* ptr) {
  int device = 0;
  if (ptr == nullptr) {
    DJL_ATTN_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
  cudaPointerAttributes attributes{};
  DJL_ATTN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    fail_native("a CUDA kernel was given a pointer that is not device memory (type ",
                static_cast<int>(attributes.type), ")");
  }
  return attributes.device;
}

cudaStream_t current_stream(int device) {
  // A captured step's launches go to its capture stream (cuda/common/scratch.h).
  if (cudaStream_t capture = step_capture::stream(device)) return capture;
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

const DeviceFacts& device_facts(int device) {
  static std::array<DeviceFacts, 64> facts{};
  static std::array<std::once_flag, 64> once;
  if (device < 0 || device >= static_cast<int>(facts.size())) {
    fail_native("CUDA device index ", device, " out of the supported range [0, 64)");
  }
  std::call_once(once[device], [device] {
    int sms = 0, smem = 0, major = 0, minor = 0;
    DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    DJL_ATTN_CUDA_CHECK(
        cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    facts[device] = {sms, smem, major, minor};
  });
  return facts[device];
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const int device = device_of(src);
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  DJL_ATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  DJL_ATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace djl_attn::cuda
