// Instantiations of the tensor-core flash forward kernel with the sliding window, soft-capping
// and ALiBi (kFeatures) for head dim 128: a file of their own, compiled in parallel with the
// plain ones (flash_fwd_hdim128.cu).
#include "cuda/flash/flash_fwd_kernel.cuh"

DJL_FLASH_INSTANTIATE_FWD_FEATURES(__half, 128)
DJL_FLASH_INSTANTIATE_FWD_FEATURES(__nv_bfloat16, 128)
