// The binding of sample_tokens: read the boxed arguments, validate them once for every caller
// (Java, Python, TorchScript), fill SampleTokensParams, hand them to a device backend. The
// schema and the rules: docs/operators.md ("sample_tokens").
#pragma once

#include "paged/paged_checks.h"
#include "sampling/sampling_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::sampling {

struct SamplingBackend {
  // Chooses the ids of a validated, non-empty batch.
  void (*run)(const SampleTokensParams& params);
  // Copies the per-row settings to the host for their checks; null for host memory.
  paged::CopyIndicesToHost copy_to_host;
  // True when the stream of the device holding `ptr` is being captured into a CUDA graph: the
  // settings cannot be read back then, and the kernel applies its rules for unchecked values
  // (sampling_rules.h). Null for host memory.
  bool (*capturing)(const void* ptr);
};

// sample_tokens(Tensor(a!) ids, Tensor logits, Tensor temperature, Tensor top_k, Tensor top_p,
//   Tensor seeds, Tensor offsets) -> ()
void sample_tokens_boxed(shim::StableIValue* stack, const SamplingBackend& backend);

}  // namespace djl_attn::sampling
