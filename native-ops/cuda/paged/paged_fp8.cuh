// The FP8 cache elements on CUDA (CacheType::kFp8E4M3 and kFp8E5M2,
// src/paged/paged_params.h): the storage types the paged kernels are instantiated with, and the
// conversions, through cuda_fp8.h. On sm_89 and later those are single cvt instructions
// (fp8x2 <-> f16x2 and f32 pairs -> fp8x2); on sm_80 cuda_fp8.h emulates them with integer
// arithmetic, which is correct there but not fast. Both keep NaN and round to nearest even,
// saturating at the largest finite value (__NV_SATFINITE: +-448 in e4m3fn, +-57344 in e5m2),
// as the CPU reference (src/common/fp8.h) and vLLM's conversions do.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "paged/paged_params.h"

namespace djl_attn::paged::kernels {

// One e4m3fn byte: a cache element of an fp8 (e4m3) cache.
struct Fp8E4M3 {
  uint8_t bits;
  static constexpr __nv_fp8_interpretation_t kFormat = __NV_E4M3;
  static constexpr CacheType kCacheType = CacheType::kFp8E4M3;
};

// One e5m2 byte: a cache element of an fp8_e5m2 cache.
struct Fp8E5M2 {
  uint8_t bits;
  static constexpr __nv_fp8_interpretation_t kFormat = __NV_E5M2;
  static constexpr CacheType kCacheType = CacheType::kFp8E5M2;
};

template <typename C>
constexpr bool kIsFp8 = std::is_same_v<C, Fp8E4M3> || std::is_same_v<C, Fp8E5M2>;

// What a cache of elements C stores.
template <typename C>
constexpr CacheType cache_type_of() {
  if constexpr (kIsFp8<C>) {
    return C::kCacheType;
  } else {
    return CacheType::kQuery;
  }
}

// The value of two fp8 bytes of format C (the low byte first): the conversion goes through
// float16, which holds every e4m3fn and e5m2 value exactly.
template <typename C>
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair),
                                                   C::kFormat);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// sat(round_to_nearest_even(x)) as a byte of format C.
template <typename C>
__device__ __forceinline__ uint8_t float_to_fp8(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, C::kFormat));
}

// Two of them, x in the low byte.
template <typename C>
__device__ __forceinline__ uint16_t float2_to_fp8x2(float x, float y) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE,
                                                        C::kFormat));
}

// The scale of kv head h (1 without scales).
__device__ __forceinline__ float scale_of(const CacheScale& scale, int64_t kv_head) {
  return scale.values != nullptr ? scale.values[kv_head * scale.head_stride] : 1.f;
}

}  // namespace djl_attn::paged::kernels
