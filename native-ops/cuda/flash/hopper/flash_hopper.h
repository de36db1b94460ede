// The Hopper (sm_90a) flash attention forward: wgmma, TMA loads completing on mbarriers, a
// producer warp and two consumer warpgroups. Body in flash_hopper.cu, which CMake compiles only
// when the configured CUDA architectures include 90 (it defines DJL_ATTN_HOPPER for the rest of
// the library then, and the plan's FlashSwitches::hopper_built says so).
#pragma once

#include <cuda_runtime.h>

#include "cuda/flash/flash_plan.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

// Runs the Hopper kernel for `p` (folded already, if the plan folds) as `plan` says
// (FlashPath::kHopper: the plan checked dtype, head dim, layout, tensor-map limits and the
// device).
void run(const FlashParams& p, const FlashPlan& plan, cudaStream_t stream, int device);

}  // namespace djl_attn::flash::hopper
