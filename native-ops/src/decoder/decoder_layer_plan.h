// The workspace of one decoder_layer call: where every temporary lives, as byte offsets into one
// buffer. Pure host arithmetic, shared by the CPU kernel and the CUDA one to come.
#pragma once

#include <cstdint>

#include "decoder/decoder_layer_params.h"

namespace djl_attn::decoder {

struct DecoderLayerPlan {
  // Byte offsets, each 64-byte aligned; every region holds elements of the stream's dtype.
  int64_t normed;     // [T, C]: norm output, the input of the qkv and up GEMMs
  int64_t qkv;        // [T, (Hq + 2 Hkv) D]: the qkv GEMM's output; q and k rotated in place
  int64_t attention;  // [T, Hq, D]: the attention output, the input of the out GEMM
  int64_t projected;  // [T, C]: the out GEMM's and the down GEMM's output
  int64_t up;         // [T, up.out]: the up GEMM's output
  int64_t activated;  // [T, I]: the activation, the input of the down GEMM (GELU: = up)
  int64_t bytes;      // the whole workspace
};

DecoderLayerPlan plan_decoder_layer(const DecoderLayerParams& p);

}  // namespace djl_attn::decoder
