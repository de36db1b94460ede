// The CUDA kernels, registered for the CUDA dispatch key when libdjl_attn_cuda.so is loaded.
// The schemas themselves are defined by libdjl_attn.so, which this library links.

#include <cuda_runtime.h>

#include <cstdio>

#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_simple.cuh"
#include "flash/flash_op.h"
#include "registration/registration.h"

namespace djl_attn::cuda {
namespace {

// Launches on PyTorch's current stream of the tensors' device, with that device current.
void launch_flash_attention(const flash::FlashParams& params) {
  cudaPointerAttributes attributes{};
  DJL_ATTN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, params.q));
  DeviceGuard guard(attributes.device);
  flash::run_flash_attention_simple_cuda(params, current_stream(attributes.device));
}

void flash_attention_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  static const flash::FlashBackend backend{launch_flash_attention, copy_to_host};
  flash::flash_attention_boxed(stack, backend);
}

constexpr KernelEntry kCudaKernels[] = {
    {"flash_attention", flash_attention_cuda},
};

struct RegisterAtLoad {
  RegisterAtLoad() {
    try {
      register_kernels("CUDA", kCudaKernels, sizeof(kCudaKernels) / sizeof(kCudaKernels[0]));
    } catch (const std::exception& e) {
      // A throw out of a load-time constructor would abort the host process.
      std::fprintf(stderr, "djl_attn: CUDA kernels not registered: %s\n", e.what());
    }
  }
} register_at_load;

}  // namespace
}  // namespace djl_attn::cuda
