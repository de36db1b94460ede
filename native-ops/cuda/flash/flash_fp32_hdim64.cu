// The float32 tensor-core flash kernels of head dim 64 (flash_fp32_kernel.cuh), in a file of their
// own so that the head dims compile in parallel.
#include "cuda/flash/flash_fp32_kernel.cuh"

DJL_FLASH_FP32_INSTANTIATE(64)
