// Instantiations of the tensor-core flash forward kernel for head dim 96 (one file per head dim
// so that nvcc compiles them in parallel).
#include "cuda/flash/flash_fwd_kernel.cuh"

DJL_FLASH_INSTANTIATE_FWD(__half, 96)
DJL_FLASH_INSTANTIATE_FWD(__nv_bfloat16, 96)
