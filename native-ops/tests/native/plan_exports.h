// Shared by the C entry points of libdjl_attn_plans.so (tests/native/*_plan_exports.cpp): the
// plan functions of the CUDA launchers, reachable through ctypes from tests/test_plans_*.py.
#pragma once

#include <cstdint>
#include <string>

#include "common/element_type.h"
#include "flash/flash_params.h"

namespace djl_attn::plan_exports {

// The element type of `element_size` bytes: 4 float32, 2 float16 (bfloat16 plans the same).
inline ElementType element_type_of(int32_t element_size) {
  return element_size == 4 ? ElementType::kFloat32 : ElementType::kFloat16;
}

// A pointer at `value`: plans look at the alignment of the pointers they get, never through them.
inline void* address(uint64_t value) { return reinterpret_cast<void*>(value); }

// Keeps a result alive for the caller (one per thread) and returns its C string.
inline const char* keep(std::string value) {
  static thread_local std::string result;
  result = std::move(value);
  return result.c_str();
}

// A flash call as the flash plan exports describe it: contiguous q, k, v [B, S, H, D] (varlen:
// packed [total, H, D] with B sequences of Sq and Sk rows) and what else changes the plan.
struct FlashCallShape {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  ElementType dtype;
  float scale = 1.0f;
  bool causal = false;
  bool varlen = false;
  bool kv_lens = false;
  bool bias = false;          // q, k and v bias (the fused BERT path)
  bool broadcast_kv = false;  // k and v shared by the batch rows (batch stride 0)
  int q_offset_bytes = 0;     // q this many bytes past a 16-byte boundary
  // FlashAttention-2's features as the schema takes them: window sides (-1 unbounded; the
  // binding's set_window normalises them), soft-cap (0 none), ALiBi slopes given or not.
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.f;
  bool alibi = false;
};

// FlashParams as the binding fills them for `call`, on stand-in tensors at distinct 16-byte
// aligned addresses (q moved by q_offset_bytes): plans read only their alignment.
inline flash::FlashParams stand_in_flash_params(const FlashCallShape& call) {
  const int64_t heads_q = call.heads_q, heads_kv = call.heads_kv, head_dim = call.head_dim;
  const uint64_t base = 0x10000;
  flash::FlashParams p{};
  p.q = address(base + call.q_offset_bytes);
  p.k = address(base * 2);
  p.v = address(base * 3);
  p.out = address(base * 4);
  p.lse = static_cast<float*>(address(base * 5));
  if (call.varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(address(base * 6));
    p.cu_seqlens_k = static_cast<const int32_t*>(address(base * 7));
    p.total_q = call.batch * call.seqlen_q;
    p.total_k = call.batch * call.seqlen_k;
    p.lse_head_stride = p.total_q;
  }
  if (call.kv_lens) p.kv_lens = static_cast<const int32_t*>(address(base * 8));
  if (call.bias) {
    p.q_bias = address(base * 9);
    p.k_bias = address(base * 10);
    p.v_bias = address(base * 11);
  }
  p.q_seq_stride = heads_q * head_dim, p.q_head_stride = head_dim;
  p.k_seq_stride = p.v_seq_stride = heads_kv * head_dim;
  p.k_head_stride = p.v_head_stride = head_dim;
  p.out_seq_stride = heads_q * head_dim, p.out_head_stride = head_dim;
  if (!call.varlen) {
    p.q_batch_stride = p.out_batch_stride = call.seqlen_q * heads_q * head_dim;
    p.k_batch_stride = p.v_batch_stride =
        call.broadcast_kv ? 0 : call.seqlen_k * heads_kv * head_dim;
  }
  p.batch = call.batch;
  p.seqlen_q = call.seqlen_q;
  p.seqlen_k = call.seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.scale = call.scale;
  p.causal = call.causal;
  p.dtype = call.dtype;
  flash::set_window(p, call.window_left, call.window_right);
  p.softcap = call.softcap;
  if (call.alibi) p.alibi_slopes = static_cast<const float*>(address(base * 12));
  return p;
}

}  // namespace djl_attn::plan_exports
