// The launcher of the float32 tensor-core flash attention forward: the plan's compiled tile
// (Fp32Kernel), instantiated in the file of its head dim (flash_fp32_hdim*.cu).

#include <cassert>

#include "cuda/flash/flash_fp32_launch.h"

namespace djl_attn::flash::fp32 {

void launch_flash_fp32(const FlashParams& params, const Fp32Tile& tile, cudaStream_t stream) {
  // What plan_flash_fp32 guarantees (held by tests/test_plans_fp32.py): float32, and a tile whose
  // compiled head dim the problem's is padded to. Asserted in debug builds only.
  assert(params.dtype == ElementType::kFloat32);
  assert(params.head_dim <= facts_of(tile.kernel).head_dim);
  switch (tile.kernel) {  // every Fp32Kernel: the tiles this build compiled
#define DJL_FLASH_FP32_CASE_(D, W, SPLIT, BIAS, FEATURES)                  \
  case Fp32Kernel::DJL_FLASH_FP32_NAME_(D, W, SPLIT, BIAS, FEATURES):       \
    return launch_flash_fp32_tile<D, W, SPLIT, BIAS, FEATURES>(params, tile.vectorized, stream);
    DJL_FLASH_FP32_TILES(DJL_FLASH_FP32_CASE_)
#undef DJL_FLASH_FP32_CASE_
  }
}

}  // namespace djl_attn::flash::fp32
