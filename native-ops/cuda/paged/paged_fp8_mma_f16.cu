// The fp8 tensor-core decode kernels for float16 queries, every head dim they take (one kernel
// per head dim: the block size is a run-time value).
#include "cuda/paged/paged_fp8_mma.cuh"

namespace djl_attn::paged::kernels {
template void launch_fp8_mma<__half, Fp8E4M3>(const PagedAttentionParams&, const DecodePlan&,
                                 const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
