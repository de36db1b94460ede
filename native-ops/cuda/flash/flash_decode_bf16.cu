// Instantiations of the split-KV decode kernel for one dtype, every head dim and row policy:
// one file per dtype so that nvcc compiles them in parallel.
#include "cuda/flash/flash_decode_kernel.cuh"

DJL_FLASH_DECODE_INSTANTIATE(__nv_bfloat16)
