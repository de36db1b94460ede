// paged_prefill_attention on CUDA: a simple, correct kernel. One warp per (query row, head):
// lane l holds head-dim elements l, l + 32, ...; keys are streamed one at a time through the
// block table with an online softmax, over the keys the row sees (visible_span: from its
// sliding-window edge, 0 without one, to its own position, or past it in non-causal calls). It
// reads each key once per query row, so it is for chunked prefill of moderate chunks, not tuned. Its element loads need no alignment, so
// paged_attention runs it too (one row per sequence) on caches its vector kernels cannot read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_attention_kernel.cuh"
#include "cuda/paged/paged_cuda.h"
#include "cuda/paged/paged_fp8.cuh"
#include "cuda/paged/paged_plan.h"

namespace djl_attn::paged {
namespace {

using kernels::from_float;
using kernels::to_float;
using kernels::warp_sum;

constexpr int kWarpSize = 32;
constexpr int kSlots = kMaxHeadDim / kWarpSize;  // the largest head dim over a warp

// A cache element's value: T itself, or an fp8 byte's (unscaled: the kernel scales each cached
// key's score and value weight).
template <typename C>
__device__ __forceinline__ float cache_value(const C* at) {
  return to_float(*at);
}
template <>
__device__ __forceinline__ float cache_value<kernels::Fp8E4M3>(const kernels::Fp8E4M3* at) {
  // The pair conversion of the decode kernels on a pair (x, 0): one code path for both.
  return kernels::fp8x2_to_float2<kernels::Fp8E4M3>(at->bits).x;
}
template <>
__device__ __forceinline__ float cache_value<kernels::Fp8E5M2>(const kernels::Fp8E5M2* at) {
  return kernels::fp8x2_to_float2<kernels::Fp8E5M2>(at->bits).x;
}

// One query row of one head, by one warp (every lane calls it with the same arguments). T: the
// query's and output's type; C: the caches' (T, Fp8E4M3 or Fp8E5M2). With p.new_key, keys from the
// chunk's first position on are the chunk's own rows as given (T, unscaled), the prefix the
// cache's.
template <typename T, typename C>
__device__ __forceinline__ void attend_row(const PagedPrefillParams& p, int64_t seq,
                                           int64_t head, int64_t chunk_begin, int64_t chunk,
                                           int64_t row, int lane) {
  const int64_t context = p.kv.context_lens[seq];
  // Row t of the chunk sits at position context - chunk + t (bottom-right aligned; negative for
  // the first rows of a chunk longer than its context).
  const int64_t position = context - chunk + row;
  const int64_t dim = p.kv.head_dim, bs = p.kv.block_size;
  const int64_t kv_head = head / (p.heads_q / p.kv.heads_kv);
  const int64_t token_stride = p.kv.heads_kv * dim;
  const int32_t* table = p.kv.block_tables + seq * p.kv.table_stride;
  const C* k_cache = static_cast<const C*>(p.kv.key_cache) + kv_head * dim;
  const C* v_cache = static_cast<const C*>(p.kv.value_cache) + kv_head * dim;
  // The cache's scales multiply its scores and values; the chunk's own rows have none.
  const float k_scale = kernels::scale_of(p.kv.k_scale, kv_head);
  const float v_scale = kernels::scale_of(p.kv.v_scale, kv_head);
  // Keys from `own_first` on are the chunk's own rows (`context`, past every key, without them;
  // a chunk longer than its context has none: paged_params.h).
  const bool own_rows = p.new_key != nullptr && chunk >= kMinOwnRowsChunk && chunk <= context;
  const int64_t own_first = own_rows ? context - chunk : context;
  const T* own_k = p.new_key == nullptr ? nullptr
                   : static_cast<const T*>(p.new_key) + chunk_begin * p.new_key_token_stride +
                         kv_head * p.new_key_head_stride;
  const T* own_v = p.new_value == nullptr ? nullptr
                   : static_cast<const T*>(p.new_value) +
                         chunk_begin * p.new_value_token_stride + kv_head * p.new_value_head_stride;
  const float slope = alibi_slope(p, seq, head);
  // The keys the row sees: the others are not read.
  const KeySpan span = visible_span(position, context, p.window_left, p.window_right, p.causal);

  const T* q = static_cast<const T*>(p.query) + (chunk_begin + row) * p.q_token_stride +
               head * p.q_head_stride;
  float q_reg[kSlots], acc[kSlots];
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int64_t d = lane + i * kWarpSize;
    q_reg[i] = d < dim ? to_float(q[d]) * p.scale : 0.f;
    acc[i] = 0.f;
  }
  float row_max = -INFINITY, row_sum = 0.f;
  for (int64_t j = span.first; j < span.end; ++j) {
    // Uniform over the warp: every lane reads the same key.
    const bool own = j >= own_first;
    const int64_t offset =
        own ? 0 : (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * token_stride;
    const C* k = k_cache + offset;
    const T* ok = own ? own_k + (j - own_first) * p.new_key_token_stride : nullptr;
    float partial = 0.f;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int64_t d = lane + i * kWarpSize;
      if (d < dim) partial += q_reg[i] * (own ? to_float(ok[d]) : cache_value(k + d));
    }
    float score = warp_sum(partial) * (own ? 1.f : k_scale);
    // Uniform over the launch: the soft-cap (scale * q . k capped) before the ALiBi term.
    if (p.softcap > 0.f) score = p.softcap * tanhf(score / p.softcap);
    score += alibi_bias(slope, j, position);
    const float new_max = fmaxf(row_max, score);
    const float correction = __expf(row_max - new_max);
    const float weight = __expf(score - new_max);
    row_sum = row_sum * correction + weight;
    const C* v = v_cache + offset;
    const T* ov = own ? own_v + (j - own_first) * p.new_value_token_stride : nullptr;
    const float v_weight = weight * (own ? 1.f : v_scale);
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int64_t d = lane + i * kWarpSize;
      if (d < dim) {
        acc[i] = acc[i] * correction + v_weight * (own ? to_float(ov[d]) : cache_value(v + d));
      }
    }
    row_max = new_max;
  }

  T* out = static_cast<T*>(p.out) + ((chunk_begin + row) * p.heads_q + head) * dim;
  const float inv_sum = row_sum > 0.f ? 1.f / row_sum : 0.f;
#pragma unroll
  for (int i = 0; i < kSlots; ++i) {
    const int64_t d = lane + i * kWarpSize;
    if (d < dim) out[d] = from_float<T>(acc[i] * inv_sum);
  }
}

// Grid (row blocks of kPrefillWarps rows, heads, sequences), each dimension striding over what
// the grid does not cover (plan_paged_prefill keeps it within CUDA's limits). Without
// cu_seqlens_q every sequence has one query row, query row `seq` (paged_attention's decode).
template <typename T, typename C>
__global__ void __launch_bounds__(kPrefillWarps * kWarpSize)
    paged_prefill_kernel(PagedPrefillParams p) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  for (int64_t seq = blockIdx.z; seq < p.num_seqs; seq += gridDim.z) {
    const int64_t chunk_begin = p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[seq] : seq;
    const int64_t chunk = p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[seq + 1] - chunk_begin : 1;
    for (int64_t head = blockIdx.y; head < p.heads_q; head += gridDim.y) {
      // Whole warps take or skip a row together: shuffles stay full-mask.
      for (int64_t row = static_cast<int64_t>(blockIdx.x) * kPrefillWarps + warp; row < chunk;
           row += static_cast<int64_t>(gridDim.x) * kPrefillWarps) {
        attend_row<T, C>(p, seq, head, chunk_begin, chunk, row, lane);
      }
    }
  }
}

template <typename T>
void launch(const PagedPrefillParams& p, const PrefillPlan& plan, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y),
                  static_cast<unsigned>(plan.grid_z));
  if (p.kv.cache_type == CacheType::kFp8E4M3) {
    paged_prefill_kernel<T, kernels::Fp8E4M3><<<grid, kPrefillWarps * kWarpSize, 0, stream>>>(p);
  } else if (p.kv.cache_type == CacheType::kFp8E5M2) {
    paged_prefill_kernel<T, kernels::Fp8E5M2><<<grid, kPrefillWarps * kWarpSize, 0, stream>>>(p);
  } else {
    paged_prefill_kernel<T, T><<<grid, kPrefillWarps * kWarpSize, 0, stream>>>(p);
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("paged_prefill_kernel");
}

}  // namespace

void run_paged_prefill_cuda(const PagedPrefillParams& p) {
  const PrefillPlan plan = plan_paged_prefill(p);
  if (plan.grid_x == 0) return;  // no query rows
  const int device = cuda::device_of(p.query);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return launch<float>(p, plan, stream);
    case ElementType::kFloat16: return launch<__half>(p, plan, stream);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(p, plan, stream);
  }
}

}  // namespace djl_attn::paged
