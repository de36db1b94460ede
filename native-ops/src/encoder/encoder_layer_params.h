// Parameters of encoder_layer: one post-norm BERT encoder layer over packed tokens
// (docs/design/fused-encoder-layer.md). Knows nothing of PyTorch or Java: the binding fills it
// from validated tensors.
//
//   x [T, C] -> GEMM qkv -> attention of each sequence's tokens (q|k|v bias added on load)
//            -> GEMM out -> LayerNorm(. + out_bias + x) = h
//            -> GEMM up -> GELU(. + up_bias) -> GEMM down -> LayerNorm(. + down_bias + h) -> x
#pragma once

#include <cstdint>

#include "common/element_type.h"
#include "gemm/gemm.h"

namespace djl_attn::encoder {

using ::djl_attn::ElementType;

struct EncoderLayerParams {
  void* hidden;                // [T, C], contiguous: the layer's input, overwritten by its output
  const int32_t* cu_seqlens;   // [B + 1]: sequence b owns rows [cu[b], cu[b + 1]); cu[B] = T
  int64_t batch;               // B
  int64_t max_seqlen;          // >= every sequence's length

  gemm::Weight qkv;            // [3C, C]: query rows, then key, then value (head-major each)
  const float* qkv_bias;       // [3C]
  gemm::Weight out;            // [C, C]
  const float* out_bias;       // [C]
  const float* attn_norm_weight;  // [C] (BertSelfOutput.LayerNorm)
  const float* attn_norm_bias;    // [C]
  gemm::Weight up;             // [I, C]
  const float* up_bias;        // [I]
  gemm::Weight down;           // [C, I]
  const float* down_bias;      // [C]
  const float* ffn_norm_weight;   // [C] (BertOutput.LayerNorm)
  const float* ffn_norm_bias;     // [C]

  int64_t tokens;              // T
  int64_t hidden_size;         // C = H * D
  int64_t heads;               // H
  int64_t head_dim;            // D
  int64_t intermediate;        // I
  float norm_eps;
  float scale;                 // on q . k
  bool gelu_tanh;              // GELU's tanh approximation (gelu_new) instead of erf
  ElementType dtype;           // of hidden and of plain weights
};

}  // namespace djl_attn::encoder
