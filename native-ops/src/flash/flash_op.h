// The binding of `djl_attn::flash_attention`: reads the boxed arguments, validates them once for
// every caller (Java, Python, TorchScript), allocates the outputs and hands a FlashParams to a
// device backend. The CPU library and the CUDA library register it with their own backend.
#pragma once

#include <cstddef>

#include "flash/flash_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::flash {

struct FlashBackend {
  // Runs the forward pass; outputs are allocated and the problem is non-empty.
  void (*launch)(const FlashParams& params);
  // Copies `bytes` of device memory to the host (to range-check kv_lens), or null when the
  // backend's memory is host memory.
  void (*copy_to_host)(void* dst, const void* src, size_t bytes);
};

// flash_attention(Tensor q, Tensor k, Tensor v, Tensor? kv_lens, float scale, bool causal)
//     -> (Tensor out, Tensor lse)
void flash_attention_boxed(shim::StableIValue* stack, const FlashBackend& backend);

// flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,
//     Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float scale, bool causal)
//     -> (Tensor out [total_q, Hq, D], Tensor lse [Hq, total_q] float32)
void flash_attention_varlen_boxed(shim::StableIValue* stack, const FlashBackend& backend);

}  // namespace djl_attn::flash
