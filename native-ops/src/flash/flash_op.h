// The binding of `djl_attn::flash_attention`: reads the boxed arguments, validates them once for
// every caller (Java, Python, TorchScript), allocates the outputs and hands a FlashParams to a
// device backend. The CPU library and the CUDA library register it with their own backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/binding.h"
#include "common/check.h"
#include "common/tensor.h"
#include "flash/flash_fp8_params.h"
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

// The kernels' FlashParams of a batched call, the one place the bindings fill it
// (flash_attention, flash_attention_varlen and bert_attention): q, k and v as given, the
// outputs allocated contiguous (out [B, Sq, Hq, D], lse [B, Hq, Sq]), no kv_lens, varlen
// offsets, bias or features. A binding then sets what its call adds: kv_lens or the bias
// pointers directly, set_varlen and set_features through these functions, which keep the
// layout rules that depend on them.
FlashParams flash_params(FlashOperand q, FlashOperand k, FlashOperand v, void* out, float* lse,
                         int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                         int64_t heads_kv, int64_t head_dim, float scale, bool causal,
                         ElementType dtype);

// Varlen mode: seqlen_q and seqlen_k of `p` are the longest sequences, sequence b owns rows
// [cu_seqlens[b], cu_seqlens[b + 1]) of the packed q/out and k/v, out is [total_q, Hq, D] and
// lse FlashAttention's [Hq, total_q].
void set_varlen(FlashParams& p, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                int64_t total_q, int64_t total_k);

// The sliding window (-1: unbounded side; normalised by set_window), soft-cap (0: none) and
// ALiBi slopes ([Hq], or [B, Hq] when alibi_per_batch; null for none) as the schema gives them.
void set_features(FlashParams& p, int64_t window_left, int64_t window_right, float softcap,
                  const float* alibi_slopes, bool alibi_per_batch);

// The rule every flash binding states for CPU and CUDA alike: B * Hq * ceil(Sq / 64) query tiles
// of 64 rows fit one CUDA grid (kMaxQueryTiles). `name` is the argument that carries Sq.
void check_query_tiles(ArgName name, int64_t batch, int64_t seqlen_q, int64_t heads_q);

// Checks the dtype of q (k and v are then held to q's).
using QueryDTypeCheck = void (*)(const Tensor& q, ArgName name);

// The rules of a batched call's q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D], shared by
// flash_attention and flash_attention_fp8: ranks and sizes, Hkv >= 1 dividing Hq, D in
// [1, kMaxHeadDim], q's dtype by `check_q_dtype` and k's and v's equal to it, one supported
// device, last dims contiguous, Sq and Sk <= 2^30, the query tiles of one CUDA grid.
void check_batched_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                       QueryDTypeCheck check_q_dtype);

// kv_lens of a batched call: int32 [B] (B of q), on q's device, contiguous, values in [0, Sk]
// (read on the host through `copy_to_host`, null for host memory).
void check_kv_lens(const char* op, const Tensor& kv_lens, const Tensor& q, int64_t seqlen_k,
                   CopyToHost copy_to_host);

struct FlashBackend {
  // Runs the forward pass; outputs are allocated and the problem is non-empty.
  void (*launch)(const FlashParams& params);
  // Copies `bytes` of device memory to the host (to range-check kv_lens), or null when the
  // backend's memory is host memory.
  void (*copy_to_host)(void* dst, const void* src, size_t bytes);
  // Runs flash_attention_fp8's forward pass (flash/flash_fp8_op.h); outputs are allocated and
  // the problem is non-empty (B, Sq and Hq > 0; Sk may be 0).
  void (*launch_fp8)(const FlashFp8Params& params);
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
