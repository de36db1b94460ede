// Parameters of causal linear attention (`causal_dot_product`), shared by the CPU and CUDA
// kernels. Knows nothing of PyTorch: the operator binding fills it from tensors.
//
//   out[b, h, j, :] = sum_{i <= j} (q[b, h, j, :] . k[b, h, i, :]) v[b, h, i, :]
//
// which the kernels compute as out_j = q_j^T S_j with the running state S_j = sum_{i<=j} k_i v_i^T
// ([E, M], float32), so the cost is linear in L.
#pragma once

#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::linear {

using ::djl_attn::ElementType;

struct CausalDotProductParams {
  const void* q;  // [B, H, L, E], last dim contiguous
  const void* k;  // [B, H, L, E], last dim contiguous
  const void* v;  // [B, H, L, M], last dim contiguous
  void* out;      // [B, H, L, M], contiguous, dtype of q

  // Strides in elements.
  int64_t q_batch_stride, q_head_stride, q_seq_stride;
  int64_t k_batch_stride, k_head_stride, k_seq_stride;
  int64_t v_batch_stride, v_head_stride, v_seq_stride;
  int64_t out_batch_stride, out_head_stride, out_seq_stride;

  int64_t batch;   // B
  int64_t heads;   // H
  int64_t seqlen;  // L >= 1 when a kernel runs
  int64_t dim_qk;  // E, feature dim of q and k, in [1, kMaxDim]
  int64_t dim_v;   // M, feature dim of v and out, in [1, kMaxDim]
  ElementType dtype;
};

// The largest E and M the kernels accept (the CUDA kernels hold a state slice of up to this
// many rows per thread group).
constexpr int64_t kMaxDim = 256;

// The most thread blocks of one CUDA grid; the binding refuses B * H * M above it on every
// backend (the low-occupancy kernel runs a block per value column of each head).
constexpr int64_t kMaxGridBlocks = 0x7fffffff;

}  // namespace djl_attn::linear
