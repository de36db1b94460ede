// Causal linear attention on CUDA: the launcher that picks a kernel variant for a problem and
// the GPU it runs on.
//
// Variants (DJL_ATTN_LINEAR_KERNEL forces one; unset or "auto" lets the launcher choose):
//   per_thread     one block per (batch, head, tile of M columns); each thread carries a 32-row
//                  slice of one column of the [E, M] state through time. No redundant work, but
//                  each block walks all of L serially: right when B*H fills the SMs.
//   low_occupancy  one block per (batch, head, column of M); the block's warps split each run of
//                  time steps between them and join their partial states with a prefix sum in
//                  shared memory. Re-reads q and k once per column, but puts many warps on a
//                  short problem: right when B*H is small.
//   chunked        one block per (batch, head, tile of 64 columns, 32 when M <= 32); per chunk of
//                  64 steps the masked intra-chunk product, q times the carried float32 state
//                  (tf32) and the state update run on tensor cores (mma.sync), the next chunk
//                  loading with cp.async meanwhile. float16/bfloat16 with E <= 128 only: other
//                  requests for it run per_thread.
// When the per-thread kernel's blocks cover every SM at least once, auto picks chunked for
// float16/bfloat16 with E <= 128 and L >= 128, per_thread otherwise; when they do not,
// low_occupancy with as many warps per block (4 to 16) as keep about 32 warps per SM busy. The SM
// count is read from the device at run time.
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

// The same for a GPU described by its SM count and opt-in shared memory per block.
std::string causal_dot_product_plan_for(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                        int64_t dim_v, int64_t element_size, int sm_count,
                                        int64_t smem_limit);

}  // namespace djl_attn::linear
