// The CPU kernels of embed_tokens and decoder_head.
#pragma once

#include <cstddef>

#include "step/step_params.h"

namespace djl_attn::step {

void run_embed_tokens_cpu(const EmbedParams& params);
// The GEMM through the GEMM layer (gemm/gemm.h); the normalised rows and the 16-bit product in
// a per-thread buffer reused across calls.
void run_decoder_head_cpu(const HeadParams& params);
// memcpy.
void copy_from_host_cpu(void* dst, const void* src, size_t bytes);

}  // namespace djl_attn::step
