// The CUDA kernels of embed_tokens and decoder_head.
#pragma once

#include <cstddef>

#include "step/step_params.h"

namespace djl_attn::cuda {

void run_embed_tokens_cuda(const step::EmbedParams& params);
// Norm of the rows, GEMM on cuBLASLt (cuda/gemm), float32 logits with the soft-cap: three
// launches, temporaries in a Scratch (a captured step's arena).
void run_decoder_head_cuda(const step::HeadParams& params);
// cudaMemcpyAsync on the current stream of dst's device.
void copy_from_host_cuda(void* dst, const void* src, size_t bytes);

}  // namespace djl_attn::cuda
