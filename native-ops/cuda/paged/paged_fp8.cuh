// The FP8 (OCP e4m3fn) cache elements on CUDA (CacheType::kFp8E4M3, src/paged/paged_params.h):
// the storage type the paged kernels are instantiated with, and the conversions, through
// cuda_fp8.h. On sm_89 and later those are single cvt instructions (e4m3x2 <-> f16x2 and
// f32 pairs -> e4m3x2); on sm_80 cuda_fp8.h emulates them with integer arithmetic, which is
// correct there but not fast. Both keep NaN and round to nearest even, saturating at +-448, as
// the CPU reference (src/paged/fp8.h) does.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "paged/paged_params.h"

namespace djl_attn::paged::kernels {

// One e4m3fn byte: a cache element of an fp8 cache.
struct Fp8E4M3 {
  uint8_t bits;
};

// The value of two e4m3fn bytes (the low byte first): the conversion goes through float16,
// which holds every e4m3fn value exactly.
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair),
                                                   __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// sat(round_to_nearest_even(x)) as an e4m3fn byte.
__device__ __forceinline__ uint8_t float_to_fp8(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// Two of them, x in the low byte.
__device__ __forceinline__ uint16_t float2_to_fp8x2(float x, float y) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE,
                                                        __NV_E4M3));
}

// The scale of kv head h (1 without scales).
__device__ __forceinline__ float scale_of(const CacheScale& scale, int64_t kv_head) {
  return scale.values != nullptr ? scale.values[kv_head * scale.head_stride] : 1.f;
}

}  // namespace djl_attn::paged::kernels
