// A simple, correct flash attention forward for CUDA: one warp per query row, keys streamed
// one at a time with an online softmax. It reads K/V once per query row, so it is far from the
// memory and tensor-core limits; it is the reference the fast kernels are held against, and the
// plan's path for what they do not take (FlashPath::kSimple).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flash/flash_params.h"

namespace djl_attn::flash {

// Launches on `stream` blocks of 4 query rows, `row_blocks` = ceil(Sq / 4) per (batch, head);
// the caller has made the tensors' device current.
void run_flash_attention_simple_cuda(const FlashParams& params, int64_t row_blocks,
                                     cudaStream_t stream);

}  // namespace djl_attn::flash
