// The paged decode kernels for fp8_e5m2 caches read by float16 queries, every head dim and
// block size (one kernel per head dim: block_size_at_run_time, paged_plan.h).
#include "cuda/paged/paged_attention_launch.cuh"

namespace djl_attn::paged::kernels {
template void launch_paged_attention<__half, Fp8E5M2>(const PagedAttentionParams&,
                                                  const DecodePlan&,
                                                  const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
