// The __nv_bfloat16 instantiations of the causal_dot_product launchers (one file per dtype so that nvcc
// compiles them in parallel).
#include "cuda/linear/causal_dot_product_kernels.cuh"

namespace djl_attn::linear {

template void launch_per_thread<__nv_bfloat16>(const CausalDotProductParams&, LinearRows, bool,
                                               cudaStream_t);
template void launch_low_occupancy<__nv_bfloat16>(const CausalDotProductParams&, LinearRows, int,
                                                  bool, cudaStream_t);
template void launch_chunked<__nv_bfloat16>(const CausalDotProductParams&, ChunkedDim, ChunkedCols,
                                            bool, cudaStream_t);

}  // namespace djl_attn::linear
