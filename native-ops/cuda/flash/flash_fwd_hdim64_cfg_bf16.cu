// Instantiations of the tuning configurations (kFwdConfigs in flash_shapes.h) of the tensor-core
// flash forward for head dim 64, bf16; one file per (head dim, dtype) so that nvcc compiles them in
// parallel. The indices must be those that config_compiled accepts for head dim 64.
#include "cuda/flash/flash_fwd_kernel.cuh"

// The configuration that runs by default at this head dim (kTunedD64).
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 20)

// Tuning variants: DJL_ATTN_TUNING builds only (bench_flash.py --configs).
#if defined(DJL_ATTN_TUNING)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 1)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 2)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 3)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 5)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 6)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 7)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 8)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 9)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 11)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 12)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 14)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 16)
DJL_FLASH_INSTANTIATE_FWD_CFG(__nv_bfloat16, 64, 19)
#endif
