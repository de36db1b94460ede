// The Hopper (sm_90a) flash attention forward: wgmma, TMA loads completing on mbarriers, a
// producer warp and two consumer warpgroups; float16/bfloat16 in flash_hopper.cu, e4m3 in
// flash_hopper_fp8.cu. CMake compiles them only
// when the configured CUDA architectures include 90 (it defines DJL_ATTN_HOPPER for the rest of
// the library then, and the plan's FlashSwitches::hopper_built says so).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/flash/flash_fp8_plan.h"
#include "cuda/flash/flash_plan.h"
#include "flash/flash_fp8_params.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

// Runs the Hopper kernel for `p` (folded already, if the plan folds) as `plan` says
// (FlashPath::kHopper: the plan checked dtype, head dim, layout, tensor-map limits and the
// device).
void run(const FlashParams& p, const FlashPlan& plan, cudaStream_t stream, int device);

// Runs the e4m3 kernel for `p` as `plan` says (flash_fp8_plan.h: it checked the device, head
// dim and strides): v transposed into `vt` (plan.vt_bytes), then the kernel, whose work-item
// counter is `item_counter` (one int) (flash_hopper_fp8.cu).
void run_fp8(const FlashFp8Params& p, const FlashFp8Plan& plan, uint8_t* vt, int* item_counter,
             cudaStream_t stream, int device);

}  // namespace djl_attn::flash::hopper
