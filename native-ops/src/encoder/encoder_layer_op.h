// The bindings of encoder_layer and gemm_pack_weight: read the boxed arguments, validate them once
// for every caller (Java, Python, TorchScript), fill the parameters, hand them to a device
// backend. Layouts and rules: docs/design/fused-encoder-layer.md and docs/operators.md.
#pragma once

#include <cstdint>

#include "encoder/encoder_layer_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::encoder {

struct EncoderBackend {
  // Runs a validated layer with T >= 1; null where the backend has no kernel (CUDA: the encoder
  // runs op by op there): the binding then refuses the call, naming the device.
  void (*run)(const EncoderLayerParams& params);
  // Whether gemm_pack_weight runs here (host memory only).
  bool packs;
};

// encoder_layer(Tensor(a!) hidden, Tensor cu_seqlens, int max_seqlen, Tensor qkv_weight,
//   Tensor qkv_bias, Tensor out_weight, Tensor out_bias, Tensor attn_norm_weight,
//   Tensor attn_norm_bias, Tensor up_weight, Tensor up_bias, Tensor down_weight,
//   Tensor down_bias, Tensor ffn_norm_weight, Tensor ffn_norm_bias, int num_heads,
//   float norm_eps, float scale, bool gelu_tanh) -> ()
void encoder_layer_boxed(shim::StableIValue* stack, const EncoderBackend& backend);

// gemm_pack_weight(Tensor weight, int mode) -> Tensor: a float32 [out, in] weight prepared once
// for the fused layers' GEMMs (uint8 [bytes], valid in this process only); mode 0 float32 (MKL's
// packed layout), 1 the bfloat16 mode, 2 the int8 mode (gemm::PackMode).
void gemm_pack_weight_boxed(shim::StableIValue* stack, const EncoderBackend& backend);

}  // namespace djl_attn::encoder
