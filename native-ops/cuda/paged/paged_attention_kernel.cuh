// The paged decode attention kernels (after vLLM's PagedAttention, written for this project's
// cache layout [num_blocks, block_size, Hkv, D]).
//
// One thread block of 4 warps per (query head, sequence[, partition]):
// - QK: each warp takes one cache block at a time. A thread group of 32 / block_size lanes
//   (1 for block size 32) reads one key token, each lane loading 16-byte vectors of the row, so
//   one warp load instruction covers every token of the block; the group sums its partial dot
//   products with shuffles. Scores go to shared memory.
// - softmax over the block's scores: block-wide max and sum through shared memory.
// - LV: each warp again takes one cache block at a time; lanes split the value row into 16-byte
//   vectors (several tokens per warp instruction when the row is short) and accumulate
//   probability-weighted values in float32; warps and token lanes are summed through shared
//   memory at the end.
// v1 covers the whole context in one thread block (scores for the whole context in shared
// memory). v2 covers partitions of 512 tokens (down to 128 when the grid would be too small to
// fill the GPU) and writes each partition's max, sum and normalised output; the reduce kernel
// rescales and combines them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "paged/paged_params.h"

namespace djl_attn::paged::kernels {

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
// Tokens per v2 partition (the launcher may halve it, down to 128): a multiple of every block
// size; 2 KiB of scores in shared memory.
constexpr int kPartitionSize = 512;

// 16 bytes of T unpacked to float32.
template <typename T>
__device__ __forceinline__ void unpack(const uint4& raw, float* out);

template <>
__device__ __forceinline__ void unpack<float>(const uint4& raw, float* out) {
  out[0] = __uint_as_float(raw.x);
  out[1] = __uint_as_float(raw.y);
  out[2] = __uint_as_float(raw.z);
  out[3] = __uint_as_float(raw.w);
}

template <>
__device__ __forceinline__ void unpack<__half>(const uint4& raw, float* out) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <>
__device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4& raw, float* out) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, mask));
  }
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) x += __shfl_xor_sync(0xffffffffu, x, mask);
  return x;
}

// Every thread of the block gets the result; `red` is kWarps floats used only by this call.
__device__ __forceinline__ float block_max(float x, float* red) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  x = warp_max(x);
  if (lane == 0) red[warp] = x;
  __syncthreads();
  return warp_max(lane < kWarps ? red[lane] : -INFINITY);
}

__device__ __forceinline__ float block_sum(float x, float* red) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  x = warp_sum(x);
  if (lane == 0) red[warp] = x;
  __syncthreads();
  return warp_sum(lane < kWarps ? red[lane] : 0.f);
}

// The smallest power of two >= both a (a power of two) and b.
constexpr int pow2_at_least(int a, int b) { return a >= b ? a : pow2_at_least(2 * a, b); }

template <typename T, int kHeadDim, int kBlockSize>
struct PagedTraits {
  static constexpr int kVecElems = 16 / sizeof(T);
  static constexpr int kVecs = kHeadDim / kVecElems;  // 16-byte vectors per key/value row
  static_assert(kHeadDim % kVecElems == 0, "a row must be a whole number of 16-byte vectors");
  // QK: lanes per key token (a thread group). At least 32 / block_size, so that one warp load
  // covers the whole cache block; more when the row is long, so that a lane holds at most ~8
  // vectors in flight (block size 32 with one lane per token at D = 256 spilled 148 bytes).
  static constexpr int kGroup = pow2_at_least(
      kBlockSize < kWarpSize ? kWarpSize / kBlockSize : 1, (kVecs + 7) / 8);
  static_assert(kGroup <= kWarpSize && (kGroup * kBlockSize) % kWarpSize == 0,
                "block sizes 8, 16 and 32");
  static constexpr int kQkVecs = (kVecs + kGroup - 1) / kGroup;  // vectors per lane per token
  static constexpr int kQkTokensPerPass = kWarpSize / kGroup;
  static constexpr int kQkPasses = kBlockSize / kQkTokensPerPass;  // warp loads per block row
  // LV: lanes per value row (up to a warp), tokens per warp instruction, vectors per lane.
  static constexpr int kLanesPerRow = kVecs < kWarpSize ? kVecs : kWarpSize;
  static constexpr int kRowsPerPass = kWarpSize / kLanesPerRow;
  static constexpr int kLvVecs = kVecs / kLanesPerRow;
  static_assert(kVecs % kLanesPerRow == 0, "value rows split evenly over the lanes");
  // Partial outputs summed at the end: one row per (warp, token lane).
  static constexpr int kPartialRows = kWarps * kRowsPerPass;
};

// Workspace of v2, all float32: [num_seqs, Hq, max_partitions] maxima and sums, and
// [num_seqs, Hq, max_partitions, D] partition outputs already divided by their own sums.
struct PartitionWorkspace {
  float* max_logits;
  float* exp_sums;
  float* out;
  int max_partitions;
};

// Grid (Hq, num_seqs, partitions). partition_size 0: v1, the whole context, output to p.out;
// otherwise v2, output to `ws`. Dynamic shared memory: one float per token covered.
template <typename T, int kHeadDim, int kBlockSize>
__global__ void __launch_bounds__(kThreads)
    paged_attention_kernel(PagedAttentionParams p, int partition_size, PartitionWorkspace ws) {
  using Traits = PagedTraits<T, kHeadDim, kBlockSize>;
  constexpr int kVecElems = Traits::kVecElems;
  constexpr int kGroup = Traits::kGroup;
  constexpr int kLanesPerRow = Traits::kLanesPerRow;
  constexpr int kRowsPerPass = Traits::kRowsPerPass;

  extern __shared__ float logits[];
  __shared__ float q_s[kHeadDim];
  __shared__ float red[3 * kWarps];
  __shared__ float partial[Traits::kPartialRows][kHeadDim];

  const int head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int part = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int context = p.context_lens[seq];
  const bool partitioned = partition_size > 0;
  const int start_token = partitioned ? part * partition_size : 0;
  T* out = static_cast<T*>(p.out) + (seq * p.heads_q + head) * kHeadDim;
  if (start_token >= context) {
    // Only v1 sees a context of 0 here; v2's reduce kernel writes those zeros.
    if (!partitioned) {
      for (int d = tid; d < kHeadDim; d += kThreads) out[d] = from_float<T>(0.f);
    }
    return;
  }
  const int end_token = partitioned ? min(start_token + partition_size, context) : context;
  const int start_block = start_token / kBlockSize;
  const int end_block = (end_token + kBlockSize - 1) / kBlockSize;
  const int64_t kv_head = head / (p.heads_q / p.heads_kv);
  const int64_t token_stride = p.heads_kv * kHeadDim;  // between tokens of a cache block
  const int32_t* table = p.block_tables + seq * p.max_blocks;
  const T* k_cache = static_cast<const T*>(p.key_cache) + kv_head * kHeadDim;
  const T* v_cache = static_cast<const T*>(p.value_cache) + kv_head * kHeadDim;
  const float slope = p.alibi_slopes != nullptr ? p.alibi_slopes[head] : 0.f;

  // The scale is folded into the query once.
  const T* q = static_cast<const T*>(p.query) + seq * p.q_seq_stride + head * p.q_head_stride;
  for (int d = tid; d < kHeadDim; d += kThreads) q_s[d] = to_float(q[d]) * p.scale;
  __syncthreads();

  // ---- QK: a thread group per key token, a warp per cache block.
  const int group_lane = lane % kGroup;
  float qk_max = -INFINITY;
  for (int b = start_block + warp; b < end_block; b += kWarps) {
    const int64_t physical = table[b];
#pragma unroll
    for (int pass = 0; pass < Traits::kQkPasses; ++pass) {
      const int block_token = pass * Traits::kQkTokensPerPass + lane / kGroup;
      const T* k_row = k_cache + (physical * kBlockSize + block_token) * token_stride;
      float dot = 0.f;
#pragma unroll
      for (int j = 0; j < Traits::kQkVecs; ++j) {
        const int v = group_lane + j * kGroup;
        if (Traits::kVecs % kGroup == 0 || v < Traits::kVecs) {
          const uint4 raw = *reinterpret_cast<const uint4*>(k_row + v * kVecElems);
          float k[kVecElems];
          unpack<T>(raw, k);
#pragma unroll
          for (int e = 0; e < kVecElems; ++e) dot += q_s[v * kVecElems + e] * k[e];
        }
      }
#pragma unroll
      for (int mask = kGroup / 2; mask > 0; mask /= 2) {
        dot += __shfl_xor_sync(0xffffffffu, dot, mask);
      }
      // Tokens past the context in the last block were read (the block is valid), not used.
      const int token = b * kBlockSize + block_token;
      if (token < end_token) {
        const float logit = dot + slope * static_cast<float>(token - (context - 1));
        if (group_lane == 0) logits[token - start_token] = logit;
        qk_max = fmaxf(qk_max, logit);
      }
    }
  }

  // ---- softmax over this block's tokens.
  const int tokens = end_token - start_token;
  qk_max = block_max(qk_max, red);
  float exp_sum = 0.f;
  for (int i = tid; i < tokens; i += kThreads) {
    const float w = __expf(logits[i] - qk_max);
    logits[i] = w;
    exp_sum += w;
  }
  // block_sum's barrier also publishes the weights written above.
  exp_sum = block_sum(exp_sum, red + kWarps);

  // ---- LV: lanes split a value row into 16-byte vectors; a warp per cache block.
  const int row_lane = lane % kLanesPerRow;
  const int row_slot = lane / kLanesPerRow;
  float acc[Traits::kLvVecs][kVecElems] = {};
  if (row_slot < kRowsPerPass) {
    for (int b = start_block + warp; b < end_block; b += kWarps) {
      const int64_t physical = table[b];
      const T* v_block = v_cache + physical * kBlockSize * token_stride;
#pragma unroll
      for (int i = 0; i < (kBlockSize + kRowsPerPass - 1) / kRowsPerPass; ++i) {
        const int t = row_slot + i * kRowsPerPass;
        const int token = b * kBlockSize + t;
        // Slots past the context may hold anything, NaN included: never multiply them in.
        if (t < kBlockSize && token < end_token) {
          const float w = logits[token - start_token];
#pragma unroll
          for (int j = 0; j < Traits::kLvVecs; ++j) {
            const int v = row_lane + j * kLanesPerRow;
            const uint4 raw =
                *reinterpret_cast<const uint4*>(v_block + t * token_stride + v * kVecElems);
            float val[kVecElems];
            unpack<T>(raw, val);
#pragma unroll
            for (int e = 0; e < kVecElems; ++e) acc[j][e] += w * val[e];
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < Traits::kLvVecs; ++j) {
#pragma unroll
      for (int e = 0; e < kVecElems; ++e) {
        partial[warp * kRowsPerPass + row_slot][(row_lane + j * kLanesPerRow) * kVecElems + e] =
            acc[j][e];
      }
    }
  }
  __syncthreads();

  const float inv_sum = 1.f / exp_sum;  // > 0: at least one token, and its weight is 1
  const int64_t ws_row = (seq * p.heads_q + head) * static_cast<int64_t>(ws.max_partitions) + part;
  for (int d = tid; d < kHeadDim; d += kThreads) {
    float o = 0.f;
#pragma unroll
    for (int r = 0; r < Traits::kPartialRows; ++r) o += partial[r][d];
    o *= inv_sum;
    if (partitioned) {
      ws.out[ws_row * kHeadDim + d] = o;
    } else {
      out[d] = from_float<T>(o);
    }
  }
  if (partitioned && tid == 0) {
    ws.max_logits[ws_row] = qk_max;
    ws.exp_sums[ws_row] = exp_sum;
  }
}

// Grid (Hq, num_seqs). Combines v2's partitions: partition i's output counts with weight
// exp_sum_i * exp(max_i - max). Dynamic shared memory: one float per partition.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    paged_attention_reduce_kernel(PagedAttentionParams p, int partition_size,
                                  PartitionWorkspace ws) {
  extern __shared__ float weights[];
  __shared__ float red[2 * kWarps];
  const int head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int tid = threadIdx.x;
  const int64_t dim = p.head_dim;
  const int context = p.context_lens[seq];
  const int parts = (context + partition_size - 1) / partition_size;
  T* out = static_cast<T*>(p.out) + (seq * p.heads_q + head) * dim;
  if (parts == 0) {
    for (int64_t d = tid; d < dim; d += kThreads) out[d] = from_float<T>(0.f);
    return;
  }
  const int64_t base = (seq * p.heads_q + head) * static_cast<int64_t>(ws.max_partitions);
  float m = -INFINITY;
  for (int i = tid; i < parts; i += kThreads) m = fmaxf(m, ws.max_logits[base + i]);
  m = block_max(m, red);
  float total = 0.f;
  for (int i = tid; i < parts; i += kThreads) {
    const float w = ws.exp_sums[base + i] * __expf(ws.max_logits[base + i] - m);
    weights[i] = w;
    total += w;
  }
  total = block_sum(total, red + kWarps);  // its barrier publishes `weights`
  const float inv_total = 1.f / total;
  for (int64_t d = tid; d < dim; d += kThreads) {
    float o = 0.f;
    for (int i = 0; i < parts; ++i) o += weights[i] * ws.out[(base + i) * dim + d];
    out[d] = from_float<T>(o * inv_total);
  }
}

// How one call runs: v1 (partition_size 0) or v2, and v2's workspace.
struct LaunchPlan {
  int partition_size;
  int partitions;          // grid z: 1 for v1
  size_t shared_bytes;     // dynamic shared memory of the attention kernel
  PartitionWorkspace ws;
};

// Launches for one dtype; defined in paged_attention_<dtype>.cu. Throws on a launch error.
template <typename T>
void launch_paged_attention(const PagedAttentionParams& p, const LaunchPlan& plan, void* stream);

}  // namespace djl_attn::paged::kernels
