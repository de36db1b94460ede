// The CUDA kernels, registered for the CUDA dispatch key when libdjl_attn_cuda.so is loaded.
// The schemas themselves are defined by libdjl_attn.so, which this library links.

#include <cuda_runtime.h>

#include <cstdio>

#include "cuda/bert/bert_cuda.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/decoder/decoder_layer_cuda.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/graph/step_graph_cuda.h"
#include "cuda/linear/causal_dot_product_cuda.cuh"
#include "cuda/paged/paged_cuda.h"
#include "cuda/step/step_cuda.h"
#include "cuda/sampling/sample_tokens_cuda.h"
#include "registration/operator_kernels.h"

namespace djl_attn::cuda {
namespace {

// causal_dot_product's launch on the tensors' device and its current stream.
void launch_causal_dot_product(const linear::CausalDotProductParams& params) {
  const int device = device_of(params.q);
  DeviceGuard guard(device);
  linear::run_causal_dot_product_cuda(params, current_stream(device), device);
}

// The CUDA backend's device functions; operator_kernels.h makes the boxed kernels from them.
// bert_attention runs the flash launcher on strided views into the fused projection.
const OperatorBackends kCudaBackends{
    {flash::launch_flash_attention_cuda, copy_to_host, flash::launch_flash_attention_fp8_cuda},
    {launch_causal_dot_product},
    {bert::run_layernorm_cuda, bert::run_elementwise_cuda, bert::run_remove_padding_cuda,
     bert::run_restore_padding_cuda, copy_to_host, bert::copy_from_host_cuda},
    {paged::run_reshape_and_cache_cuda, paged::run_paged_attention_cuda,
     paged::run_paged_prefill_cuda, paged::copy_indices_to_host_cuda},
    {run_decoder_layer_cuda, paged::copy_indices_to_host_cuda},
    {run_embed_tokens_cuda, run_decoder_head_cuda, copy_from_host_cuda,
     paged::copy_indices_to_host_cuda},
    kGraphBackend,
    {run_sample_tokens_cuda, paged::copy_indices_to_host_cuda, stream_is_capturing},
    {nullptr, false},  // encoder_layer: CPU only; the CUDA encoder runs op by op
};

struct RegisterAtLoad {
  RegisterAtLoad() {
    try {
      register_operator_kernels<kCudaBackends>("CUDA");
    } catch (const std::exception& e) {
      // A throw out of a load-time constructor would abort the host process.
      std::fprintf(stderr, "djl_attn: CUDA kernels not registered: %s\n", e.what());
    }
  }
} register_at_load;

}  // namespace
}  // namespace djl_attn::cuda
