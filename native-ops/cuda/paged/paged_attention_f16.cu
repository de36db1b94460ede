// The paged decode kernels for __half caches, every head dim and block size.
#include "cuda/paged/paged_attention_launch.cuh"

namespace djl_attn::paged::kernels {
template void launch_paged_attention<__half, __half>(const PagedAttentionParams&,
                                                const DecodePlan&,
                                                const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
