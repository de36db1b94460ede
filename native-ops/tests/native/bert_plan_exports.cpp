// libdjl_attn_plans.so: the plans of the BERT CUDA launchers (cuda/bert/bert_plan.h) for
// tests/test_plans_bert.py. Pointers are passed as addresses: only their alignment matters to a
// plan, and nothing is read through them.

#include <cstdint>
#include <string>

#include "cuda/bert/bert_plan.h"
#include "tests/native/plan_exports.h"

using djl_attn::plan_exports::address;
using djl_attn::plan_exports::element_type_of;
using djl_attn::plan_exports::keep;

// The add_bias_residual_layernorm plan for [rows, C] activations of `element_size` bytes at
// `activation_address` (x, residual and output alike) and per-channel vectors of `param_size`
// bytes at `param_address` (with a bias when `bias`), on a GPU with `smem_optin` bytes of opt-in
// shared memory per block.
extern "C" const char* djl_attn_test_layernorm_plan(int64_t rows, int64_t channels,
                                                     int32_t element_size, int32_t param_size,
                                                     uint64_t activation_address,
                                                     uint64_t param_address, int32_t bias,
                                                     int32_t sm_count, int64_t smem_optin) {
  using namespace djl_attn::bert;
  LayerNormParams p{};
  p.x = p.residual = address(activation_address);
  p.out = address(activation_address);
  p.gamma = p.beta = address(param_address);
  p.bias = bias ? address(param_address) : nullptr;
  p.rows = rows;
  p.channels = channels;
  p.dtype = element_type_of(element_size);
  p.param_dtype = element_type_of(param_size);
  return keep(describe(plan_layernorm(p, {sm_count, smem_optin, 9, 0})));
}

// The add_bias_gelu (affine = 0) or add_bias_residual_affine (affine = 1) plan, laid out as for
// the layernorm above (a bias always).
extern "C" const char* djl_attn_test_elementwise_plan(int64_t rows, int64_t channels,
                                                       int32_t element_size, int32_t param_size,
                                                       uint64_t activation_address,
                                                       uint64_t param_address, int32_t affine) {
  using namespace djl_attn::bert;
  ElementwiseParams p{};
  p.x = address(activation_address);
  p.out = address(activation_address);
  p.bias = address(param_address);
  if (affine) {
    p.residual = address(activation_address);
    p.scale = p.shift = address(param_address);
  }
  p.rows = rows;
  p.channels = channels;
  p.epilogue = affine ? Epilogue::kAffine : Epilogue::kGeluErf;
  p.dtype = element_type_of(element_size);
  p.param_dtype = element_type_of(param_size);
  return keep(describe(plan_elementwise(p)));
}

// The padding plan of `rows` rows of C elements: contiguous [B, S, C] padded at
// `padded_address`, packed at `packed_address`.
extern "C" const char* djl_attn_test_padding_plan(int64_t rows, int64_t seqlen, int64_t channels,
                                                   int32_t element_size, uint64_t padded_address,
                                                   uint64_t packed_address) {
  using namespace djl_attn::bert;
  PaddingParams p{};
  p.padded = address(padded_address);
  p.packed = address(packed_address);
  p.padded_batch_stride = seqlen * channels;
  p.padded_seq_stride = channels;
  p.seqlen = seqlen;
  p.channels = channels;
  p.element_size = element_size;
  return keep(describe(plan_padding(p, rows)));
}
