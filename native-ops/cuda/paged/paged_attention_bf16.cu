// The paged decode kernels for __nv_bfloat16 caches, every head dim and block size.
#include "cuda/paged/paged_attention_launch.cuh"

namespace djl_attn::paged::kernels {
template void launch_paged_attention<__nv_bfloat16, __nv_bfloat16>(const PagedAttentionParams&,
                                                const DecodePlan&,
                                                const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
