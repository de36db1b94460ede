// The paged decode kernels for float caches, every head dim and block size.
#include "cuda/paged/paged_attention_launch.cuh"

namespace djl_attn::paged::kernels {
template void launch_paged_attention<float, float>(const PagedAttentionParams&,
                                                const DecodePlan&,
                                                const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
