// The fused BERT operators on CUDA. Each entry point launches on PyTorch's current stream of
// the data's device, with that device current, and checks the launch; they are the CUDA
// BertBackend. Plain C++: included by the registration file.
#pragma once

#include <cstddef>

#include "bert/bert_params.h"

namespace djl_attn::bert {

// Warp-per-row when a row fits the registers of one warp (up to 256 16-byte vectors), else
// block-per-row with the row staged in shared memory, or read from global memory in each pass
// when it does not fit there; float32 statistics. The plan (bert_plan.h) picks.
void run_layernorm_cuda(const LayerNormParams& params);
// One 16-byte vector per thread and step when C and the pointers allow it, else scalars.
void run_elementwise_cuda(const ElementwiseParams& params);
// One warp per token row.
void run_remove_padding_cuda(const PaddingParams& params);
void run_restore_padding_cuda(const PaddingParams& params);
// Host to device copy on the current stream of dst's device; returns once `src` may be reused.
void copy_from_host_cuda(void* dst, const void* src, size_t bytes);

}  // namespace djl_attn::bert
