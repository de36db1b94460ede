// Run-time dtypes of the BERT operators become the compile-time types T (activations) and P
// (per-channel parameters) here, and only here. Usage:
//   DJL_BERT_DISPATCH_TYPES(p.dtype, p.param_dtype, [&] { launch<T, P>(p); });
// The binding allows P = T or P = float; float32 activations take float32 parameters. The
// switch names every ElementType, so no type is left to refuse; the body returns void.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bert/bert_params.h"

#define DJL_BERT_DISPATCH_TYPES(DTYPE, PARAM_DTYPE, ...)                                       \
  [&] {                                                                                        \
    using ::djl_attn::bert::ElementType;                                                       \
    const bool djl_bert_float_params_ = (PARAM_DTYPE) == ElementType::kFloat32;                \
    switch (DTYPE) { /* every ElementType */                                                   \
      case ElementType::kFloat32: {                                                            \
        using T = float;                                                                       \
        using P = float;                                                                       \
        return __VA_ARGS__();                                                                  \
      }                                                                                        \
      case ElementType::kFloat16: {                                                            \
        using T = __half;                                                                      \
        if (djl_bert_float_params_) {                                                          \
          using P = float;                                                                     \
          return __VA_ARGS__();                                                                \
        }                                                                                      \
        using P = __half;                                                                      \
        return __VA_ARGS__();                                                                  \
      }                                                                                        \
      case ElementType::kBFloat16: {                                                           \
        using T = __nv_bfloat16;                                                               \
        if (djl_bert_float_params_) {                                                          \
          using P = float;                                                                     \
          return __VA_ARGS__();                                                                \
        }                                                                                      \
        using P = __nv_bfloat16;                                                               \
        return __VA_ARGS__();                                                                  \
      }                                                                                        \
    }                                                                                          \
  }()
