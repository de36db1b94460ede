// Causal linear attention on CUDA: the launcher runs the variant the plan
// (causal_dot_product_plan.h, where the variants are described) chooses for a problem and the
// GPU it runs on; DJL_ATTN_LINEAR_KERNEL forces one (unset or "auto" lets the plan choose).
#pragma once

#include <cstdint>
#include <string>

#include "linear/linear_params.h"

namespace djl_attn::linear {

// Launches on `stream` (a cudaStream_t); the caller has made `device` current.
void run_causal_dot_product_cuda(const CausalDotProductParams& params, void* stream, int device);

// The variant (and warps per block) the launcher would use for this problem on `device`, with
// DJL_ATTN_LINEAR_KERNEL applied: "per_thread", "low_occupancy/8w" or "chunked".
// `element_size` is that of the dtype (4 for float32, 2 for float16 and bfloat16).
std::string causal_dot_product_plan(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                    int64_t dim_v, int64_t element_size, int device);

}  // namespace djl_attn::linear
