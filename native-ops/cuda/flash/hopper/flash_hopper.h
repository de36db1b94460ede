// The Hopper (sm_90a) flash attention forward: wgmma, TMA loads completing on mbarriers, a
// producer warp and two consumer warpgroups. Body in flash_hopper.cu, which CMake compiles only
// when the configured CUDA architectures include 90 (it defines DJL_ATTN_HOPPER for the rest of
// the library then); without it the launcher below is a stub that declines every call.
#pragma once

#include <cuda_runtime.h>

#include "flash/flash_params.h"

namespace djl_attn::flash::hopper {

// Whether run() would take these parameters (dtype, head dim, layout, device, tensor-map limits),
// without launching anything. Batched layout only; no q/k/v bias; D = 64 or 128.
bool supports(const FlashParams& p, int device);

// Runs the Hopper kernel when supports(p, device); returns false (having launched nothing) when
// it does not apply, so that the caller falls back to the sm_80 kernel.
bool run(const FlashParams& p, cudaStream_t stream, int device);

}  // namespace djl_attn::flash::hopper
