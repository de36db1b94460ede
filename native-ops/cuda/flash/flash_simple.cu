#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_simple.cuh"

namespace djl_attn::flash {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kWarpSize = 32;
// Each lane holds head-dim elements lane, lane + 32, ...: 8 slots cover D = 256.
constexpr int kSlots = kMaxHeadDim / kWarpSize;

template <typename T>
__device__ __forceinline__ float load_float(const T* p) {
  return cuda::to_float(*p);
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    flash_simple_kernel(FlashParams p, int64_t row_blocks, int64_t block0) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t block = block0 + blockIdx.x;
  const int64_t bh = block / row_blocks;
  const int64_t row = (block % row_blocks) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t b = bh / p.heads_q;
  const int64_t h = bh % p.heads_q;
  const SeqExtent<int64_t> seq(p, b);  // flash_params.h
  const int64_t q_row0 = seq.q_row0, k_row0 = seq.k_row0;
  const int64_t seqlen_q = seq.seqlen_q;
  if (row >= seqlen_q) return;  // whole warps exit together: shuffles stay full-mask
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t dim = p.head_dim;

  int64_t kv_len = seq.kv_len(p, b);
  // The keys this row sees: the causal limit and the sliding window (flash_params.h).
  const int64_t diagonal = kv_len - seqlen_q;
  const KeyRange keys = visible_keys(p, diagonal, kv_len, row, row);
  // Soft-capping and ALiBi (a warp-uniform branch per key; this kernel is the fallback for
  // GPUs before sm_80, where correctness, not speed, is its purpose).
  const bool score_mods = has_score_mods(p);
  const float slope = alibi_slope(p, b, h);

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + (q_row0 + row) * p.q_seq_stride +
               h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + k_row0 * p.k_seq_stride +
               h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + k_row0 * p.v_seq_stride +
               h_kv * p.v_head_stride;
  const T* q_bias = p.q_bias ? static_cast<const T*>(p.q_bias) + h * dim : nullptr;
  const T* k_bias = p.k_bias ? static_cast<const T*>(p.k_bias) + h_kv * dim : nullptr;
  const T* v_bias = p.v_bias ? static_cast<const T*>(p.v_bias) + h_kv * dim : nullptr;

  float q_reg[kSlots];
  float acc[kSlots];
  // Bias of this lane's head-dim elements for k and v, loaded once (0 where there is none).
  float k_add[kSlots];
  float v_add[kSlots];
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int64_t d = lane + i * kWarpSize;
    const bool in = d < dim;
    const float q_add = in && q_bias ? load_float(q_bias + d) : 0.f;
    k_add[i] = in && k_bias ? load_float(k_bias + d) : 0.f;
    v_add[i] = in && v_bias ? load_float(v_bias + d) : 0.f;
    q_reg[i] = in ? (load_float(q + d) + q_add) * p.scale : 0.f;
    acc[i] = 0.f;
  }
  float row_max = -INFINITY;
  float row_sum = 0.f;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const T* kj = k + j * p.k_seq_stride;
    float partial = 0.f;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int64_t d = lane + i * kWarpSize;
      if (d < dim) partial += q_reg[i] * (load_float(kj + d) + k_add[i]);
    }
    float score = warp_sum(partial);
    if (score_mods) {
      const int64_t pos = row + diagonal;
      score = modify_score(score, p.softcap, slope, static_cast<float>(pos > j ? pos - j : j - pos));
    }
    const float new_max = fmaxf(row_max, score);
    const float correction = __expf(row_max - new_max);
    const float weight = __expf(score - new_max);
    row_sum = row_sum * correction + weight;
    const T* vj = v + j * p.v_seq_stride;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int64_t d = lane + i * kWarpSize;
      if (d < dim) acc[i] = acc[i] * correction + weight * (load_float(vj + d) + v_add[i]);
    }
    row_max = new_max;
  }

  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + (q_row0 + row) * p.out_seq_stride +
           h * p.out_head_stride;
  const float inv_sum = row_sum > 0.f ? 1.f / row_sum : 0.f;
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int64_t d = lane + i * kWarpSize;
    if (d < dim) out[d] = cuda::from_float<T>(acc[i] * inv_sum);
  }
  if (lane == 0) {
    p.lse[lse_offset(p, b, h) + row] =
        row_sum > 0.f ? row_max + logf(row_sum) : -INFINITY;
  }
}

// Launches the grid of `blocks` blocks in launches of at most 2^31 - 1 (CUDA's limit on
// gridDim.x): this kernel's blocks are 4 query rows, so large problems that the tile kernels
// cover in one grid need several here.
template <typename T>
void launch(const FlashParams& p, int64_t row_blocks, cudaStream_t stream) {
  constexpr int64_t kMaxGridX = 0x7fffffffLL;
  const int64_t blocks = row_blocks * p.batch * p.heads_q;
  for (int64_t block0 = 0; block0 < blocks; block0 += kMaxGridX) {
    const int64_t count = blocks - block0 < kMaxGridX ? blocks - block0 : kMaxGridX;
    flash_simple_kernel<T><<<static_cast<unsigned>(count), kWarpsPerBlock * kWarpSize, 0, stream>>>(
        p, row_blocks, block0);
    DJL_ATTN_CUDA_CHECK_LAUNCH("flash_simple_kernel");
  }
}

}  // namespace

void run_flash_attention_simple_cuda(const FlashParams& params, int64_t row_blocks,
                                     cudaStream_t stream) {
  switch (params.dtype) {
    case ElementType::kFloat32: return launch<float>(params, row_blocks, stream);
    case ElementType::kFloat16: return launch<__half>(params, row_blocks, stream);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(params, row_blocks, stream);
  }
}

}  // namespace djl_attn::flash
