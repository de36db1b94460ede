// Compile-time dispatch of the paged decode kernels over head dim, block size and kernel
// configuration, included by one .cu file per dtype so that nvcc builds the dtypes in parallel.
// It runs the plan (paged_plan.h) it is given: every choice was made there.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_attention_kernel.cuh"

namespace djl_attn::paged::kernels {

// The configurations StreamConfig names (KernelConfig<warps, loads, min blocks per SM, ring
// stages>); see docs/design/paged-cuda.md for what each is meant to test.
using ConfigW8L2 = KernelConfig<8, 2, 2, 0>;   // 16 warps/SM, 2 K + 2 V loads per lane
using ConfigSmem4 = KernelConfig<4, 4, 3, 4>;  // 12 warps/SM, 3 chunks ahead in shared memory
using ConfigSmem8 = KernelConfig<8, 2, 2, 4>;  // 16 warps/SM, 3 half chunks ahead in shared memory
using ConfigPf = KernelConfig<4, 4, 3, 0, true>;   // the default + next cache block into L2
using ConfigW8L2Pf = KernelConfig<8, 2, 2, 0, true>;  // w8l2 + next cache block into L2

// A configuration as it runs on caches of C. An fp8 lane holds 16 dims of each of the tile's
// queries and accumulators (a float16 lane 8), about 240 registers: held to the 168 of 3
// resident 4-warp blocks, every fp8 instantiation spilled (up to 540 bytes, ptxas sm_90); at 2
// blocks (1 for 8 warps) none does, and 8 warps x 32 lanes x 8 loads x 16 bytes = 32 KiB per SM
// stay in flight.
template <typename C, typename Config>
using CacheConfig = std::conditional_t<
    kIsFp8<C>,
    KernelConfig<Config::kWarps, Config::kLoads, Config::kWarps == 4 ? 2 : 1, Config::kStages,
                 Config::kPrefetch>,
    Config>;

template <typename T, typename C, int kHeadDim, int kBlockSize, typename Requested>
void launch_shape(const PagedAttentionParams& p, const DecodePlan& plan,
                  const PartitionWorkspace& ws, cudaStream_t stream) {
  using Config = CacheConfig<C, Requested>;
  // Grid x: the tiles of one kv head side by side, so that tiles sharing K/V (a group larger
  // than kHeadTile) run at the same time and share it through L2.
  const dim3 grid(static_cast<unsigned>(p.kv.heads_kv * plan.head_tiles),
                  static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(plan.partitions));
  constexpr int smem = ring_smem_bytes<C, kHeadDim, kBlockSize, Config>();
  auto* kernel = paged_attention_kernel<T, C, kHeadDim, kBlockSize, Config>;
  if constexpr (smem > 48 * 1024) {
    // Past 48 KiB a kernel must opt in; the attribute is per device, so set it on every call
    // (a host-side attribute write, no synchronisation).
    DJL_ATTN_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  kernel<<<grid, Config::kThreads, smem, stream>>>(p, plan.partition_size, plan.head_tiles, ws);
  DJL_ATTN_CUDA_CHECK_LAUNCH("paged_attention_kernel");
  if (plan.partition_size > 0) {
    const dim3 reduce_grid(static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.num_seqs));
    paged_attention_reduce_kernel<T>
        <<<reduce_grid, kThreads, ws.max_partitions * sizeof(float), stream>>>(
            p, plan.partition_size, ws);
    DJL_ATTN_CUDA_CHECK_LAUNCH("paged_attention_reduce_kernel");
  }
}

template <typename T, typename C, int kHeadDim, typename Config>
void launch_block_size(const PagedAttentionParams& p, const DecodePlan& plan,
                       const PartitionWorkspace& ws, cudaStream_t stream) {
  constexpr CacheType kCache = cache_type_of<C>();
  if constexpr (block_size_at_run_time(kCache)) {
    // One kernel for every block size (paged_plan.h).
    return launch_shape<T, C, kHeadDim, kRunTimeBlockSize, Config>(p, plan, ws, stream);
  } else {
    // One kernel per block size of the one list (src/paged/paged_params.h).
    switch (plan.block_size) {  // every PagedBlockSize
#define DJL_PAGED_BLOCK_CASE(b) \
  case PagedBlockSize::k##b: return launch_shape<T, C, kHeadDim, b, Config>(p, plan, ws, stream);
      DJL_PAGED_FOR_EACH_BLOCK_SIZE(DJL_PAGED_BLOCK_CASE)
#undef DJL_PAGED_BLOCK_CASE
    }
  }
}

// smem4 and the tuning configurations exist where has_stream_configs (paged_plan.h) says so;
// elsewhere only the register default is compiled, and the plan names kDefault
// (plan_paged_attention; tests/test_plans_paged.py checks every such shape): a precondition that
// no configuration is refused for, since any would stream the same keys to the same result.
template <typename T, typename C, int kHeadDim>
void launch_head_dim(const PagedAttentionParams& p, const DecodePlan& plan,
                     const PartitionWorkspace& ws, cudaStream_t stream) {
  constexpr ElementType kDtype = std::is_same_v<T, float> ? ElementType::kFloat32
                                                          : ElementType::kFloat16;
  constexpr CacheType kCache = cache_type_of<C>();
  if constexpr (has_stream_configs(kDtype, kCache, kHeadDim)) {
    switch (plan.config) {  // every StreamConfig: the configurations this build compiled
      case StreamConfig::kDefault: break;
      case StreamConfig::kSmem4:
        return launch_block_size<T, C, kHeadDim, ConfigSmem4>(p, plan, ws, stream);
#if defined(DJL_ATTN_TUNING)
      // Tuning variants (bench_paged.py --configs): DJL_ATTN_TUNING builds only.
      case StreamConfig::kW8L2:
        return launch_block_size<T, C, kHeadDim, ConfigW8L2>(p, plan, ws, stream);
      case StreamConfig::kSmem8:
        return launch_block_size<T, C, kHeadDim, ConfigSmem8>(p, plan, ws, stream);
      case StreamConfig::kPf:
        return launch_block_size<T, C, kHeadDim, ConfigPf>(p, plan, ws, stream);
      case StreamConfig::kW8L2Pf:
        return launch_block_size<T, C, kHeadDim, ConfigW8L2Pf>(p, plan, ws, stream);
#endif
    }
  }
  return launch_block_size<T, C, kHeadDim, DefaultConfig>(p, plan, ws, stream);
}

template <typename T, typename C>
void launch_paged_attention(const PagedAttentionParams& p, const DecodePlan& plan,
                            const PartitionWorkspace& ws, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // One kernel per head dim of the one list (src/paged/paged_params.h); a head dim between them
  // runs on the next one up, which the plan names.
  switch (plan.kernel_head_dim) {  // every PagedHeadDim
#define DJL_PAGED_HEAD_DIM_CASE(d) \
  case PagedHeadDim::k##d: return launch_head_dim<T, C, d>(p, plan, ws, s);
    DJL_PAGED_FOR_EACH_HEAD_DIM(DJL_PAGED_HEAD_DIM_CASE)
#undef DJL_PAGED_HEAD_DIM_CASE
  }
}

}  // namespace djl_attn::paged::kernels
