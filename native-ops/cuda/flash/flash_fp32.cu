// The launcher of the float32 tensor-core flash attention forward: one compiled head dim per
// instantiation file (flash_fp32_hdim*.cu), chosen here by the tile's head dim.

#include "common/error.h"
#include "cuda/flash/flash_fp32_launch.h"

namespace djl_attn::flash::fp32 {

void launch_flash_fp32(const FlashParams& params, const Fp32Tile& tile, cudaStream_t stream) {
  if (params.dtype != ElementType::kFloat32) {
    fail_native("flash_fp32: float32 only, got element type ", static_cast<int>(params.dtype));
  }
  if (params.head_dim > tile.head_dim) {
    fail_native("flash_fp32: head dim ", params.head_dim, " exceeds the tile's ", tile.head_dim);
  }
  switch (tile.head_dim) {
#define DJL_FLASH_FP32_CASE_(D) \
  case D:                       \
    return launch_flash_fp32_hdim<D>(params, tile, stream);
    DJL_FLASH_FP32_FOR_EACH_HEAD_DIM(DJL_FLASH_FP32_CASE_)
#undef DJL_FLASH_FP32_CASE_
    default:
      fail_native("flash_fp32: no kernel compiled for head dim ", tile.head_dim);
  }
}

}  // namespace djl_attn::flash::fp32
