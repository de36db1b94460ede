// Compile-time dispatch of the paged decode kernels over head dim and block size, included by
// one .cu file per dtype so that nvcc builds the dtypes in parallel.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_attention_kernel.cuh"

namespace djl_attn::paged::kernels {

template <typename T, int kHeadDim, int kBlockSize>
void launch_shape(const PagedAttentionParams& p, const LaunchPlan& plan, cudaStream_t stream) {
  // Grid x: the tiles of one kv head side by side, so that tiles sharing K/V (a group larger
  // than kHeadTile) run at the same time and share it through L2.
  const dim3 grid(static_cast<unsigned>(p.heads_kv * plan.head_tiles),
                  static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(plan.partitions));
  paged_attention_kernel<T, kHeadDim, kBlockSize>
      <<<grid, kThreads, 0, stream>>>(p, plan.partition_size, plan.head_tiles, plan.ws);
  DJL_ATTN_CUDA_CHECK_LAUNCH("paged_attention_kernel");
  if (plan.partition_size > 0) {
    const dim3 reduce_grid(static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.num_seqs));
    paged_attention_reduce_kernel<T>
        <<<reduce_grid, kThreads, plan.ws.max_partitions * sizeof(float), stream>>>(
            p, plan.partition_size, plan.ws);
    DJL_ATTN_CUDA_CHECK_LAUNCH("paged_attention_reduce_kernel");
  }
}

template <typename T, int kHeadDim>
void launch_head_dim(const PagedAttentionParams& p, const LaunchPlan& plan, cudaStream_t stream) {
  switch (p.block_size) {
    case 8: return launch_shape<T, kHeadDim, 8>(p, plan, stream);
    case 16: return launch_shape<T, kHeadDim, 16>(p, plan, stream);
    case 32: return launch_shape<T, kHeadDim, 32>(p, plan, stream);
    default: fail_native("paged_attention: no CUDA kernel for block size ", p.block_size);
  }
}

template <typename T>
void launch_paged_attention(const PagedAttentionParams& p, const LaunchPlan& plan, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.head_dim) {
    case 64: return launch_head_dim<T, 64>(p, plan, s);
    case 80: return launch_head_dim<T, 80>(p, plan, s);
    case 96: return launch_head_dim<T, 96>(p, plan, s);
    case 128: return launch_head_dim<T, 128>(p, plan, s);
    case 256: return launch_head_dim<T, 256>(p, plan, s);
    default: fail_native("paged_attention: no CUDA kernel for head dim ", p.head_dim);
  }
}

}  // namespace djl_attn::paged::kernels
