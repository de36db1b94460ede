// Parameters of the flash attention forward pass, shared by the CPU and CUDA kernels.
// Knows nothing of PyTorch: the operator bindings (flash_attention, flash_attention_varlen and
// the fused BERT path) fill it from tensors.
#pragma once

#include <cstdint>

#include "common/element_type.h"

#if defined(__CUDACC__)
#define DJL_FLASH_HOST_DEVICE __host__ __device__
#else
#define DJL_FLASH_HOST_DEVICE
#endif

namespace djl_attn::flash {

using ::djl_attn::ElementType;

struct FlashParams {
  // Batched mode (cu_seqlens_q == null): shapes as written. Varlen mode: the batch strides are
  // 0 and sequence b occupies rows [cu_seqlens[b], cu_seqlens[b + 1]) of the packed tensors,
  // q [total_q, Hq, D], k/v [total_k, Hkv, D], out [total_q, Hq, D].
  const void* q;  // [B, Sq, Hq, D], last dim contiguous
  const void* k;  // [B, Sk, Hkv, D], last dim contiguous
  const void* v;  // [B, Sk, Hkv, D], last dim contiguous
  void* out;      // [B, Sq, Hq, D], last dim contiguous, dtype of q
  // Natural-log sum of exp(scaled scores) per row, float32. Element (b, h, i) is at
  // b * lse_batch_stride + h * lse_head_stride + row0(b) + i, where row0(b) is cu_seqlens_q[b]
  // in varlen mode and 0 otherwise. lse_head_stride == 0 means the contiguous [B, Hq, Sq] layout
  // (lse_batch_stride = Hq * Sq, lse_head_stride = Sq); varlen uses [Hq, total_q].
  float* lse;
  int64_t lse_batch_stride, lse_head_stride;

  // Valid keys per batch row (right padding), or null for all Sk. Batched mode only. // [B] int32
  const int32_t* kv_lens;
  // Varlen mode: cumulative sequence lengths, or null for batched mode. // [B + 1] int32 each
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;

  // Bias added to every q / k / v element as it is loaded, before scaling, or null for none:
  // the fused BERT path adds the QKV projection bias here. Same dtype as q. // [H, D] each,
  // contiguous, H = Hq for q_bias and Hkv for k_bias and v_bias
  const void* q_bias;
  const void* k_bias;
  const void* v_bias;

  // Strides in elements.
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t out_batch_stride, out_seq_stride, out_head_stride;

  int64_t batch;      // B
  // Varlen mode: the rows of the packed q (and out) and of k and v; unused in batched mode.
  int64_t total_q, total_k;
  int64_t seqlen_q;   // Sq; in varlen mode max_seqlen_q, the longest sequence
  int64_t seqlen_k;   // Sk; in varlen mode max_seqlen_k
  int64_t heads_q;    // Hq
  int64_t heads_kv;   // Hkv; Hq % Hkv == 0, query head h reads key/value head h / (Hq / Hkv)
  int64_t head_dim;   // D

  float scale;        // multiplies q·k before the softmax
  // Causal masking aligned to the bottom-right corner, as FlashAttention does: with L valid keys
  // query row i sees key j iff j <= i + (L - Sq). When Sq == L this is the usual lower triangle;
  // when Sq < L the queries are the last Sq positions of the sequence (decode with a cache).
  // In varlen mode Sq and L are the lengths of sequence b.
  bool causal;
  ElementType dtype;
};

// The largest head dim the kernels accept.
constexpr int64_t kMaxHeadDim = 256;

// The longest Sq or Sk the kernels accept: they index rows and key tiles with 32-bit ints.
constexpr int64_t kMaxSeqLen = int64_t{1} << 30;

// The CUDA kernels run one thread block per query tile of each (batch, head), in one grid of at
// most 2^31 - 1 blocks; their smallest tiles are 64 rows (the decode kernel's blocks, one per
// (batch, head), are fewer still, and the simple kernel launches its 4-row blocks in several
// grids). The bindings refuse, on every backend, calls with more tiles than that.
constexpr int64_t kQueryTileRows = 64;
constexpr int64_t kMaxQueryTiles = 0x7fffffff;

// The head dims the tensor-core CUDA kernel is compiled for; any other D <= kMaxHeadDim runs
// padded up to the next one (the padding is zero-filled on load and never stored). This line is
// the one list: the CUDA dispatch, its instantiation files, the tests and docs/operators.md
// read it.
#define DJL_FLASH_FOR_EACH_HEAD_DIM(X) X(32) X(64) X(96) X(128) X(256)

// Where lse element (b, h, 0) lives, resolving the default layout.
DJL_FLASH_HOST_DEVICE inline int64_t lse_offset(const FlashParams& p, int64_t b, int64_t h) {
  if (p.lse_head_stride == 0) return (b * p.heads_q + h) * p.seqlen_q;
  return b * p.lse_batch_stride + h * p.lse_head_stride +
         (p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[b] : 0);
}

}  // namespace djl_attn::flash
