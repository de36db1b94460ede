// The binding of `djl_attn::flash_attention`: reads the boxed arguments, validates them once for
// every caller (Java, Python, TorchScript), allocates the outputs and hands a FlashParams to a
// device backend. The CPU library and the CUDA library register it with their own backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/check.h"
#include "common/tensor.h"
#include "flash/flash_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::flash {

// One of q, k, v as the kernels read it: a [B, S, H, D] view with element strides (batch stride
// 0 for varlen's packed [total, H, D] rows), last dim contiguous.
struct FlashOperand {
  const void* data;
  int64_t batch_stride, seq_stride, head_stride;
};

// q, k or v given as a tensor: [B, S, H, D], or packed [total, H, D] (varlen).
FlashOperand flash_operand(const Tensor& t);

// What a binding knows of one call; flash_params() is the one place that turns it into the
// kernels' FlashParams (flash_attention, flash_attention_varlen and bert_attention all go
// through it).
struct FlashCall {
  FlashOperand q, k, v;
  void* out;   // contiguous [B, Sq, Hq, D]; varlen: [total_q, Hq, D]
  float* lse;  // contiguous [B, Hq, Sq]; varlen: [Hq, total_q]
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  float scale;
  bool causal;
  ElementType dtype;
  const int32_t* kv_lens = nullptr;  // [B] valid keys per batch row, or null for all Sk
  // Varlen mode (cu_seqlens_q non-null): seqlen_q and seqlen_k are the longest sequences.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t total_q = 0, total_k = 0;
  // [H, D] bias of q (H = Hq), k and v (H = Hkv), added on load; null for none.
  const void* q_bias = nullptr;
  const void* k_bias = nullptr;
  const void* v_bias = nullptr;
  // Sliding window (-1: unbounded side), soft-cap (0: none) and ALiBi slopes ([Hq] or [B, Hq]
  // float32, null for none), as the schema gives them; flash_params() normalises the window.
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
};

FlashParams flash_params(const FlashCall& call);

// The rule every flash binding states for CPU and CUDA alike: B * Hq * ceil(Sq / 64) query tiles
// of 64 rows fit one CUDA grid (kMaxQueryTiles). `name` is the argument that carries Sq.
void check_query_tiles(ArgName name, int64_t batch, int64_t seqlen_q, int64_t heads_q);

struct FlashBackend {
  // Runs the forward pass; outputs are allocated and the problem is non-empty.
  void (*launch)(const FlashParams& params);
  // Copies `bytes` of device memory to the host (to range-check kv_lens), or null when the
  // backend's memory is host memory.
  void (*copy_to_host)(void* dst, const void* src, size_t bytes);
};

// flash_attention(Tensor q, Tensor k, Tensor v, Tensor? kv_lens, float scale, bool causal,
//     int window_left=-1, int window_right=-1, float softcap=0.0, Tensor? alibi_slopes=None)
//     -> (Tensor out, Tensor lse)
void flash_attention_boxed(shim::StableIValue* stack, const FlashBackend& backend);

// flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,
//     Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float scale, bool causal,
//     int window_left=-1, int window_right=-1, float softcap=0.0, Tensor? alibi_slopes=None)
//     -> (Tensor out [total_q, Hq, D], Tensor lse [Hq, total_q] float32)
void flash_attention_varlen_boxed(shim::StableIValue* stack, const FlashBackend& backend);

}  // namespace djl_attn::flash
