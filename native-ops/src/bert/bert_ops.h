// Bindings of the fused BERT operators: each reads its boxed arguments, validates them once for
// every caller (Java, Python, TorchScript), allocates the outputs and hands a parameters struct
// to a device backend. The CPU library and the CUDA library register them with their own
// backend.
#pragma once

#include <cstddef>

#include "bert/bert_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::bert {

struct BertBackend {
  // Each runs one pass; outputs are allocated and the problem is non-empty.
  void (*layernorm)(const LayerNormParams& params);
  void (*elementwise)(const ElementwiseParams& params);
  void (*remove_padding)(const PaddingParams& params);
  void (*restore_padding)(const PaddingParams& params);
  // Copies between the backend's memory and the host (to range-check lengths and to write the
  // prefix sums), or null when the backend's memory is host memory.
  void (*copy_to_host)(void* dst, const void* src, size_t bytes);
  void (*copy_from_host)(void* dst, const void* src, size_t bytes);
};

// add_bias_residual_layernorm(Tensor x, Tensor? bias, Tensor residual, Tensor gamma,
//     Tensor beta, float eps) -> Tensor
void add_bias_residual_layernorm_boxed(shim::StableIValue* stack, const BertBackend& backend);

// add_bias_gelu(Tensor x, Tensor? bias, bool tanh_approximation) -> Tensor
void add_bias_gelu_boxed(shim::StableIValue* stack, const BertBackend& backend);

// add_bias_residual_affine(Tensor x, Tensor? bias, Tensor residual, Tensor scale,
//     Tensor shift) -> Tensor
void add_bias_residual_affine_boxed(shim::StableIValue* stack, const BertBackend& backend);

// remove_padding(Tensor x, Tensor lens) -> (Tensor packed, Tensor cu_seqlens)
void remove_padding_boxed(shim::StableIValue* stack, const BertBackend& backend);

// restore_padding(Tensor packed, Tensor cu_seqlens, int seqlen) -> Tensor
void restore_padding_boxed(shim::StableIValue* stack, const BertBackend& backend);

}  // namespace djl_attn::bert
