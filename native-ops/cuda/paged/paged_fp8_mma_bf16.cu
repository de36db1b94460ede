// The fp8 tensor-core decode kernels for bfloat16 queries, every head dim they take (one kernel
// per head dim: the block size is a run-time value).
#include "cuda/paged/paged_fp8_mma.cuh"

namespace djl_attn::paged::kernels {
template void launch_fp8_mma<__nv_bfloat16, Fp8E4M3>(const PagedAttentionParams&, const DecodePlan&,
                                 const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
