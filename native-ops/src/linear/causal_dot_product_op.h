// The binding of `djl_attn::causal_dot_product`: reads the boxed arguments, validates them once
// for every caller (Java, Python, TorchScript), allocates the output and hands the parameters to
// a device backend. The CPU library and the CUDA library register it with their own backend.
#pragma once

#include "linear/linear_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::linear {

struct CausalDotProductBackend {
  // Runs the kernel; the output is allocated and the problem is non-empty.
  void (*launch)(const CausalDotProductParams& params);
};

// causal_dot_product(Tensor q, Tensor k, Tensor v) -> Tensor
void causal_dot_product_boxed(shim::StableIValue* stack, const CausalDotProductBackend& backend);

}  // namespace djl_attn::linear
