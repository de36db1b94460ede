// Instantiations of the split-KV decode kernel with the sliding window and soft-cap (kFeatures)
// for one dtype, every head dim and row policy: apart from the plain ones
// (flash_decode_bf16.cu) so that nvcc compiles them in parallel.
#include "cuda/flash/flash_decode_kernel.cuh"

DJL_FLASH_DECODE_INSTANTIATE_FEATURES(__nv_bfloat16)
