// The binding of decoder_layer: read the boxed arguments, validate them once for every caller
// (Java, Python, TorchScript), fill DecoderLayerParams, hand them to a device backend. The
// schema and every argument's layout: docs/design/fused-decoder-layer.md and docs/operators.md.
#pragma once

#include "decoder/decoder_layer_params.h"
#include "paged/paged_checks.h"
#include "shim/torch_shim.h"

namespace djl_attn::decoder {

struct DecoderBackend {
  // Runs a validated layer with T >= 1; null where the backend has no kernel yet (CUDA): the
  // binding then refuses the call, naming the device.
  void (*run)(const DecoderLayerParams& params);
  // Copies index tensors to the host for their checks; null for host memory.
  paged::CopyIndicesToHost copy_to_host;
};

// decoder_layer(Tensor(a!) hidden, Tensor positions, Tensor(b!) key_cache,
//   Tensor(c!) value_cache, Tensor block_tables, Tensor cu_seqlens_q, Tensor context_lens,
//   Tensor slot_mapping, Tensor? k_scale, Tensor? v_scale, Tensor attn_norm_weight,
//   Tensor? attn_norm_bias, Tensor qkv_weight, Tensor? qkv_bias, Tensor? rope_cos_sin,
//   Tensor out_weight, Tensor? out_bias, Tensor? attn_out_norm_weight, Tensor mlp_norm_weight,
//   Tensor? mlp_norm_bias, Tensor up_weight, Tensor? up_bias, Tensor down_weight,
//   Tensor? down_bias, Tensor? mlp_out_norm_weight, int num_heads, int norm_type,
//   int activation, float norm_eps, float scale, int window_left, float softcap,
//   bool rope_interleaved, bool check_indices=True, int max_seqlen_q=-1,
//   bool fresh_chunks=False, bool fp8_e5m2=False) -> ()
//
// fp8_e5m2: a uint8 cache holds e5m2 bytes, as reshape_and_cache takes it (paged_op.h).
void decoder_layer_boxed(shim::StableIValue* stack, const DecoderBackend& backend);

}  // namespace djl_attn::decoder
