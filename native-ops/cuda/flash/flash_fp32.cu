// The launcher of the float32 tensor-core flash attention forward: one compiled head dim per
// instantiation file (flash_fp32_hdim*.cu), chosen here by the tile's head dim.

#include <cassert>

#include "cuda/flash/flash_fp32_launch.h"

namespace djl_attn::flash::fp32 {

void launch_flash_fp32(const FlashParams& params, const Fp32Tile& tile, cudaStream_t stream) {
  // What plan_flash_fp32 guarantees (held by tests/test_plans_fp32.py): float32, and a tile whose
  // compiled head dim the problem's is padded to. Asserted in debug builds only.
  assert(params.dtype == ElementType::kFloat32);
  assert(params.head_dim <= static_cast<int>(tile.head_dim));
  switch (tile.head_dim) {  // every Fp32HeadDim
#define DJL_FLASH_FP32_CASE_(D) \
  case Fp32HeadDim::k##D:       \
    return launch_flash_fp32_hdim<D>(params, tile, stream);
    DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(DJL_FLASH_FP32_CASE_)
#undef DJL_FLASH_FP32_CASE_
  }
}

}  // namespace djl_attn::flash::fp32
