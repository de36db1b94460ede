// The bindings of embed_tokens and decoder_head: validate once for every caller, fill the
// parameters, hand them to a device backend (docs/operators.md).
#pragma once

#include <cstddef>

#include "paged/paged_checks.h"
#include "shim/torch_shim.h"
#include "step/step_params.h"

namespace djl_attn::step {

struct StepBackend {
  void (*embed)(const EmbedParams& params);  // T >= 1
  void (*head)(const HeadParams& params);    // R >= 1
  // Copies host memory into the backend's memory (bytes >= 1), in stream order on CUDA.
  void (*copy_from_host)(void* dst, const void* src, size_t bytes);
  // Copies index tensors to the host for their checks; null for host memory.
  paged::CopyIndicesToHost copy_to_host;
};

// embed_tokens(Tensor(a!) hidden, Tensor token_ids, Tensor embedding, Tensor? positions,
//   Tensor? position_embedding, float scale, bool check_indices=True) -> ()
void embed_tokens_boxed(shim::StableIValue* stack, const StepBackend& backend);

// decoder_head(Tensor(a!) logits, Tensor hidden, Tensor? rows, Tensor norm_weight,
//   Tensor? norm_bias, Tensor head_weight, int norm_type, float norm_eps, float softcap,
//   bool check_indices=True) -> ()
void decoder_head_boxed(shim::StableIValue* stack, const StepBackend& backend);

// copy_from_host(Tensor(a!) dst, Tensor src) -> (): a step's host-built inputs into the arrays
// the step (or its captured graph) reads, which keep their addresses.
void copy_from_host_boxed(shim::StableIValue* stack, const StepBackend& backend);

}  // namespace djl_attn::step
