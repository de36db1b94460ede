// The fp8 tensor-core decode kernels for e5m2 caches (vLLM's fp8_e5m2) read by bfloat16 queries,
// every head dim they take (one kernel per head dim: the block size is a run-time value).
#include "cuda/paged/paged_fp8_mma.cuh"

namespace djl_attn::paged::kernels {
template void launch_fp8_mma<__nv_bfloat16, Fp8E5M2>(const PagedAttentionParams&, const DecodePlan&,
                                          const PartitionWorkspace&, void*);
}  // namespace djl_attn::paged::kernels
