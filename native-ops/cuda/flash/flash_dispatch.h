// Run-time values become compile-time ones here and only here. Each macro runs its body with
// a constant (or a type) named by the caller, for every value of the plan's enumerations of what
// is compiled (TileType, TileHeadDim in flash_plan.h): there is no value left to refuse.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/flash/flash_plan.h"
#include "cuda/flash/flash_shapes.h"
#include "flash/flash_params.h"

// DJL_FLASH_DTYPE_SWITCH(tile_type, T, { ... T ... }): TileType::kFloat16 -> __half,
// TileType::kBFloat16 -> __nv_bfloat16.
#define DJL_FLASH_DTYPE_SWITCH(TYPE, T, ...)                                                 \
  [&] {                                                                                      \
    static_assert(std::is_same_v<decltype(TYPE), ::djl_attn::flash::TileType>);             \
    if ((TYPE) == ::djl_attn::flash::TileType::kFloat16) {                                   \
      using T = __half;                                                                      \
      return __VA_ARGS__();                                                                  \
    }                                                                                        \
    using T = __nv_bfloat16;                                                                 \
    return __VA_ARGS__();                                                                    \
  }()

#define DJL_FLASH_HEAD_DIM_CASE_(D)           \
  case ::djl_attn::flash::TileHeadDim::k##D: { \
    constexpr int kDispatchHeadDim_ = D;      \
    return djl_flash_head_dim_body_(std::integral_constant<int, kDispatchHeadDim_>{}); \
  }

// DJL_FLASH_HEAD_DIM_SWITCH(tile_head_dim, kHeadDim, { ... kHeadDim ... }) over the list in
// flash_params.h (DJL_FLASH_FOR_EACH_HEAD_DIM), one case per TileHeadDim. The `default` label
// shares the first case only so that the compiler sees every path return: TileHeadDim has no
// value without its case.
#define DJL_FLASH_HEAD_DIM_SWITCH(HEAD_DIM, CONST_NAME, ...)                                 \
  [&] {                                                                                      \
    auto djl_flash_head_dim_body_ = [&](auto djl_flash_constant_) {                          \
      constexpr int CONST_NAME = decltype(djl_flash_constant_)::value;                       \
      return __VA_ARGS__();                                                                  \
    };                                                                                       \
    static_assert(std::is_same_v<decltype(HEAD_DIM), ::djl_attn::flash::TileHeadDim>);      \
    switch (HEAD_DIM) {                                                                      \
      default:                                                                               \
      DJL_FLASH_FOR_EACH_HEAD_DIM(DJL_FLASH_HEAD_DIM_CASE_)                                  \
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
