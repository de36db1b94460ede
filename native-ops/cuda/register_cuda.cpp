// The CUDA kernels, registered for the CUDA dispatch key when libdjl_attn_cuda.so is loaded.
// The schemas themselves are defined by libdjl_attn.so, which this library links.

#include <cuda_runtime.h>

#include <cstdio>

#include "bert/bert_attention_op.h"
#include "bert/bert_ops.h"
#include "cuda/bert/bert_cuda.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/linear/causal_dot_product_cuda.cuh"
#include "flash/flash_op.h"
#include "linear/causal_dot_product_op.h"
#include "cuda/paged/paged_cuda.h"
#include "paged/paged_op.h"
#include "registration/registration.h"

namespace djl_attn::cuda {
namespace {

void flash_attention_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  static const flash::FlashBackend backend{flash::launch_flash_attention_cuda, copy_to_host};
  flash::flash_attention_boxed(stack, backend);
}

void flash_attention_varlen_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  static const flash::FlashBackend backend{flash::launch_flash_attention_cuda, copy_to_host};
  flash::flash_attention_varlen_boxed(stack, backend);
}

void launch_causal_dot_product(const linear::CausalDotProductParams& params) {
  const int device = device_of(params.q);
  DeviceGuard guard(device);
  linear::run_causal_dot_product_cuda(params, current_stream(device), device);
}

void causal_dot_product_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  static const linear::CausalDotProductBackend backend{launch_causal_dot_product};
  linear::causal_dot_product_boxed(stack, backend);
}

// bert_attention runs the flash launcher on strided views into the fused projection.
void bert_attention_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  static const flash::FlashBackend backend{flash::launch_flash_attention_cuda, copy_to_host};
  bert::bert_attention_boxed(stack, backend);
}

const bert::BertBackend& bert_cuda_backend() {
  static const bert::BertBackend backend{
      bert::run_layernorm_cuda,       bert::run_elementwise_cuda, bert::run_remove_padding_cuda,
      bert::run_restore_padding_cuda, copy_to_host,               bert::copy_from_host_cuda};
  return backend;
}

void add_bias_residual_layernorm_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  bert::add_bias_residual_layernorm_boxed(stack, bert_cuda_backend());
}

void add_bias_gelu_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  bert::add_bias_gelu_boxed(stack, bert_cuda_backend());
}

void add_bias_residual_affine_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  bert::add_bias_residual_affine_boxed(stack, bert_cuda_backend());
}

void remove_padding_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  bert::remove_padding_boxed(stack, bert_cuda_backend());
}

void restore_padding_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  bert::restore_padding_boxed(stack, bert_cuda_backend());
}

const paged::PagedBackend& paged_cuda_backend() {
  static const paged::PagedBackend backend{paged::run_reshape_and_cache_cuda,
                                           paged::run_paged_attention_cuda,
                                           paged::run_paged_prefill_cuda,
                                           paged::copy_indices_to_host_cuda};
  return backend;
}

void reshape_and_cache_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  paged::reshape_and_cache_boxed(stack, paged_cuda_backend());
}

void paged_attention_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  paged::paged_attention_boxed(stack, paged_cuda_backend());
}

void paged_prefill_attention_cuda(shim::StableIValue* stack, uint64_t, uint64_t) {
  paged::paged_prefill_attention_boxed(stack, paged_cuda_backend());
}

constexpr KernelEntry kCudaKernels[] = {
    {"reshape_and_cache", reshape_and_cache_cuda},
    {"paged_attention", paged_attention_cuda},
    {"paged_prefill_attention", paged_prefill_attention_cuda},
    {"flash_attention", flash_attention_cuda},
    {"flash_attention_varlen", flash_attention_varlen_cuda},
    {"bert_attention", bert_attention_cuda},
    {"add_bias_residual_layernorm", add_bias_residual_layernorm_cuda},
    {"add_bias_gelu", add_bias_gelu_cuda},
    {"add_bias_residual_affine", add_bias_residual_affine_cuda},
    {"remove_padding", remove_padding_cuda},
    {"restore_padding", restore_padding_cuda},
    {"causal_dot_product", causal_dot_product_cuda},
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
