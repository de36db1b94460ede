// Run-time values become compile-time ones here and only here. Each macro runs its body with
// a constant (or a type) named by the caller; an unsupported value fails loudly with the value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/error.h"
#include "cuda/flash/flash_shapes.h"
#include "flash/flash_params.h"

// DJL_FLASH_DTYPE_SWITCH(dtype, T, { ... T ... }): float16 -> __half, bfloat16 -> __nv_bfloat16.
#define DJL_FLASH_DTYPE_SWITCH(DTYPE, T, ...)                                                \
  [&] {                                                                                      \
    switch (DTYPE) {                                                                         \
      case ::djl_attn::flash::ElementType::kFloat16: {                                       \
        using T = __half;                                                                    \
        return __VA_ARGS__();                                                                \
      }                                                                                      \
      case ::djl_attn::flash::ElementType::kBFloat16: {                                      \
        using T = __nv_bfloat16;                                                             \
        return __VA_ARGS__();                                                                \
      }                                                                                      \
      default:                                                                               \
        ::djl_attn::fail_native("flash tensor-core kernel: unsupported element type ",       \
                                static_cast<int>(DTYPE));                                    \
    }                                                                                        \
  }()

#define DJL_FLASH_HEAD_DIM_CASE_(D)           \
  case D: {                                   \
    constexpr int kDispatchHeadDim_ = D;      \
    return djl_flash_head_dim_body_(std::integral_constant<int, kDispatchHeadDim_>{}); \
  }

// DJL_FLASH_HEAD_DIM_SWITCH(padded_dim, kHeadDim, { ... kHeadDim ... }) over the list in
// flash_params.h (DJL_FLASH_FOR_EACH_HEAD_DIM).
#define DJL_FLASH_HEAD_DIM_SWITCH(HEAD_DIM, CONST_NAME, ...)                                 \
  [&] {                                                                                      \
    auto djl_flash_head_dim_body_ = [&](auto djl_flash_constant_) {                          \
      constexpr int CONST_NAME = decltype(djl_flash_constant_)::value;                       \
      return __VA_ARGS__();                                                                  \
    };                                                                                       \
    switch (HEAD_DIM) {                                                                      \
      DJL_FLASH_FOR_EACH_HEAD_DIM(DJL_FLASH_HEAD_DIM_CASE_)                                  \
      default:                                                                               \
        ::djl_attn::fail_native("flash tensor-core kernel: no instantiation for head dim ",  \
                                static_cast<long long>(HEAD_DIM));                           \
    }                                                                                        \
  }()

// DJL_FLASH_BOOL_SWITCH(flag, kFlag, { ... kFlag ... }).
#define DJL_FLASH_BOOL_SWITCH(FLAG, CONST_NAME, ...) \
  [&] {                                              \
    if (FLAG) {                                      \
      constexpr bool CONST_NAME = true;              \
      return __VA_ARGS__();                          \
    } else {                                         \
      constexpr bool CONST_NAME = false;             \
      return __VA_ARGS__();                          \
    }                                                \
  }()
