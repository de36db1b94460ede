// Instantiations of the tuning configurations (kFwdConfigs in flash_shapes.h) of the tensor-core
// flash forward for head dim 128, fp16; one file per (head dim, dtype) so that nvcc compiles them in
// parallel. The indices must be those that config_compiled accepts for head dim 128.
#include "cuda/flash/flash_fwd_kernel.cuh"

// The configuration that runs by default at this head dim (kTunedD128).
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 18)

// Tuning variants: DJL_ATTN_TUNING builds only (bench_flash.py --configs).
#if defined(DJL_ATTN_TUNING)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 1)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 2)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 3)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 4)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 10)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 13)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 15)
DJL_FLASH_INSTANTIATE_FWD_CFG(__half, 128, 17)
#endif
