// The workspace of one encoder_layer call: where every temporary lives, as byte offsets into one
// buffer. Pure host arithmetic.
#pragma once

#include <cstdint>

#include "encoder/encoder_layer_params.h"

namespace djl_attn::encoder {

struct EncoderLayerPlan {
  // Byte offsets, each 64-byte aligned; activation regions hold elements of the stream's dtype.
  int64_t qkv;        // [T, 3C]: the qkv GEMM's output (biases are added by the attention)
  int64_t attention;  // [T, H, D]: the attention output, the out GEMM's input
  int64_t projected;  // [T, C]: the out GEMM's and the down GEMM's output
  int64_t normed;     // [T, C]: h, the first LayerNorm's output (the second's residual)
  int64_t up;         // [T, I]: the up GEMM's output, GELU in place
  int64_t lse;        // [H, T] float32: the attention's log-sum-exp (written, not read)
  int64_t scratch;    // the GEMM layer's scratch for the largest of the four products
  int64_t bytes;      // the whole workspace
};

EncoderLayerPlan plan_encoder_layer(const EncoderLayerParams& p);

}  // namespace djl_attn::encoder
