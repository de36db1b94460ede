// A simple, correct flash attention forward for CUDA: one warp per query row, keys streamed
// one at a time with an online softmax. It reads K/V once per query row, so it is far from the
// memory and tensor-core limits; it is the reference the fast kernels are held against.
#pragma once

#include "flash/flash_params.h"

namespace djl_attn::flash {

// Launches on `stream`; the caller has made the tensors' device current.
void run_flash_attention_simple_cuda(const FlashParams& params, void* stream);

}  // namespace djl_attn::flash
