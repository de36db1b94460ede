// Instantiations of the split-KV decode kernel with ALiBi (kAlibi, with the sliding window and
// soft-cap of kFeatures) for one dtype, every head dim and row policy: apart from the others
// (flash_decode_fp16.cu, flash_decode_fp16_features.cu) so that nvcc compiles them in parallel.
#include "cuda/flash/flash_decode_kernel.cuh"

DJL_FLASH_DECODE_INSTANTIATE_ALIBI(__half)
