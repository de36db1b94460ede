// Parameters of the flash attention forward pass, shared by the CPU and CUDA kernels.
// Knows nothing of PyTorch: the operator binding fills it from tensors.
#pragma once

#include <cstdint>

namespace djl_attn::flash {

enum class ElementType { kFloat32, kFloat16, kBFloat16 };

struct FlashParams {
  const void* q;  // [B, Sq, Hq, D], last dim contiguous
  const void* k;  // [B, Sk, Hkv, D], last dim contiguous
  const void* v;  // [B, Sk, Hkv, D], last dim contiguous
  void* out;      // [B, Sq, Hq, D], contiguous, dtype of q
  float* lse;     // [B, Hq, Sq], contiguous: natural-log sum of exp(scaled scores) per row

  // Valid keys per batch row (right padding), or null for all Sk. // [B] int32
  const int32_t* kv_lens;

  // Strides in elements.
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t out_batch_stride, out_seq_stride, out_head_stride;

  int64_t batch;      // B
  int64_t seqlen_q;   // Sq
  int64_t seqlen_k;   // Sk
  int64_t heads_q;    // Hq
  int64_t heads_kv;   // Hkv; Hq % Hkv == 0, query head h reads key/value head h / (Hq / Hkv)
  int64_t head_dim;   // D

  float scale;        // multiplies q·k before the softmax
  // Causal masking aligned to the bottom-right corner, as FlashAttention does: with L valid keys
  // query row i sees key j iff j <= i + (L - Sq). When Sq == L this is the usual lower triangle;
  // when Sq < L the queries are the last Sq positions of the sequence (decode with a cache).
  bool causal;
  ElementType dtype;
};

// The largest head dim the kernels accept.
constexpr int64_t kMaxHeadDim = 256;

}  // namespace djl_attn::flash
