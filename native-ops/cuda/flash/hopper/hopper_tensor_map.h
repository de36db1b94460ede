// The TMA tensor maps of the Hopper kernels' operands (host side of flash_hopper.cu and
// flash_hopper_fp8.cu), encoded through the driver the CUDA runtime already loaded: the library
// links no libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

namespace djl_attn::flash::hopper {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled, or null when the driver does not have it.
inline EncodeTiled encode_fn() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A 4-d map over `ptr` (dims innermost first, the outer three's strides in bytes) whose boxes are
// box_inner x box_rows elements of one (head, batch), 128-byte swizzled (box_inner elements are
// 128 bytes); reads outside the dims are zeros. False when the driver refuses (the plans checked
// its rules on strides and alignment) or has no encoder.
inline bool make_tiled_map(CUtensorMap* map, CUtensorMapDataType type, const void* ptr,
                           const cuuint64_t (&dims)[4], const cuuint64_t (&byte_strides)[3],
                           cuuint32_t box_inner, cuuint32_t box_rows) {
  const EncodeTiled encode = encode_fn();
  if (encode == nullptr) return false;
  const cuuint32_t box[4] = {box_inner, box_rows, 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  return encode(map, type, 4, const_cast<void*>(ptr), dims, byte_strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace djl_attn::flash::hopper
