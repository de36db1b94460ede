// reshape_and_cache on CUDA: one thread block per token copies its Hkv key and value rows into
// the token's slot, 16 bytes per thread per step where the plan (paged_plan.h) finds the rows
// aligned for it; an fp8 cache gets them quantised, 8 bytes per thread per step where it can.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_cuda.h"
#include "cuda/paged/paged_fp8.cuh"
#include "cuda/paged/paged_plan.h"

namespace djl_attn::paged {
namespace {

// V is the unit each thread moves: uint4 (16 bytes) or T itself. Block b copies token
// first_token + b: one token per block and no loop around it, the shape measured fastest (a
// grid-stride loop here cost 6-10% at 128 and 16k tokens on an H200, docs/benchmarks.md).
template <typename T, typename V>
__global__ void __launch_bounds__(kCacheThreads)
    reshape_and_cache_kernel(ReshapeAndCacheParams p, int64_t first_token) {
  constexpr int kPerUnit = sizeof(V) / sizeof(T);
  const int64_t token = first_token + blockIdx.x;
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;
  const int64_t units = p.kv.head_dim / kPerUnit;  // per row
  const int64_t row_stride = p.kv.heads_kv * p.kv.head_dim;
  const T* key = static_cast<const T*>(p.key) + token * p.key_token_stride;
  const T* value = static_cast<const T*>(p.value) + token * p.value_token_stride;
  T* key_cache = static_cast<T*>(p.kv.key_cache) + slot * row_stride;
  T* value_cache = static_cast<T*>(p.kv.value_cache) + slot * row_stride;
  for (int64_t i = threadIdx.x; i < p.kv.heads_kv * units; i += kCacheThreads) {
    const int64_t h = i / units, u = (i % units) * kPerUnit;
    *reinterpret_cast<V*>(key_cache + h * p.kv.head_dim + u) =
        *reinterpret_cast<const V*>(key + h * p.key_head_stride + u);
    *reinterpret_cast<V*>(value_cache + h * p.kv.head_dim + u) =
        *reinterpret_cast<const V*>(value + h * p.value_head_stride + u);
  }
}

// The fp8 cache's kernel: each thread quantises kGroup consecutive elements of a row (x / scale,
// saturated, rounded to nearest even) and stores them in one store of kGroup bytes (kGroup 8:
// one 8-byte word, or 1: a byte) in the format of C (Fp8E4M3 or Fp8E5M2). True division, as the
// CPU reference does, so both backends write the same bytes.
template <typename T, typename C, int kGroup>
__global__ void __launch_bounds__(kCacheThreads)
    reshape_and_cache_fp8_kernel(ReshapeAndCacheParams p, int64_t first_token) {
  using kernels::scale_of;
  const int64_t token = first_token + blockIdx.x;
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;
  const int64_t groups = p.kv.head_dim / kGroup;  // per row
  const int64_t row_stride = p.kv.heads_kv * p.kv.head_dim;
  const T* key = static_cast<const T*>(p.key) + token * p.key_token_stride;
  const T* value = static_cast<const T*>(p.value) + token * p.value_token_stride;
  uint8_t* key_cache = static_cast<uint8_t*>(p.kv.key_cache) + slot * row_stride;
  uint8_t* value_cache = static_cast<uint8_t*>(p.kv.value_cache) + slot * row_stride;
  for (int64_t i = threadIdx.x; i < p.kv.heads_kv * groups; i += kCacheThreads) {
    const int64_t h = i / groups, u = (i % groups) * kGroup;
    const float k_scale = scale_of(p.kv.k_scale, h), v_scale = scale_of(p.kv.v_scale, h);
    const T* k = key + h * p.key_head_stride + u;
    const T* v = value + h * p.value_head_stride + u;
    if constexpr (kGroup == 1) {
      key_cache[h * p.kv.head_dim + u] =
          kernels::float_to_fp8<C>(__fdiv_rn(cuda::to_float(k[0]), k_scale));
      value_cache[h * p.kv.head_dim + u] =
          kernels::float_to_fp8<C>(__fdiv_rn(cuda::to_float(v[0]), v_scale));
    } else {
      static_assert(kGroup == 8, "one 8-byte word");
      uint16_t kb[4], vb[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        kb[e] = kernels::float2_to_fp8x2<C>(__fdiv_rn(cuda::to_float(k[2 * e]), k_scale),
                                            __fdiv_rn(cuda::to_float(k[2 * e + 1]), k_scale));
        vb[e] = kernels::float2_to_fp8x2<C>(__fdiv_rn(cuda::to_float(v[2 * e]), v_scale),
                                            __fdiv_rn(cuda::to_float(v[2 * e + 1]), v_scale));
      }
      *reinterpret_cast<uint2*>(key_cache + h * p.kv.head_dim + u) =
          make_uint2(kb[0] | (uint32_t{kb[1]} << 16), kb[2] | (uint32_t{kb[3]} << 16));
      *reinterpret_cast<uint2*>(value_cache + h * p.kv.head_dim + u) =
          make_uint2(vb[0] | (uint32_t{vb[1]} << 16), vb[2] | (uint32_t{vb[3]} << 16));
    }
  }
}

template <typename T, typename C>
void launch_fp8(const ReshapeAndCacheParams& p, const CachePlan& plan, unsigned blocks,
                int64_t first, cudaStream_t stream) {
  if (plan.vectorised) {
    reshape_and_cache_fp8_kernel<T, C, kFp8Group><<<blocks, kCacheThreads, 0, stream>>>(p, first);
  } else {
    reshape_and_cache_fp8_kernel<T, C, 1><<<blocks, kCacheThreads, 0, stream>>>(p, first);
  }
}

// One launch per slice of plan.blocks tokens (a single one below CUDA's 2^31 - 1 grid limit).
template <typename T>
void launch(const ReshapeAndCacheParams& p, const CachePlan& plan, cudaStream_t stream) {
  for (int64_t first = 0; first < p.num_tokens; first += plan.blocks) {
    const unsigned blocks = static_cast<unsigned>(std::min(plan.blocks, p.num_tokens - first));
    if (p.kv.cache_type == CacheType::kFp8E4M3) {
      launch_fp8<T, kernels::Fp8E4M3>(p, plan, blocks, first, stream);
    } else if (p.kv.cache_type == CacheType::kFp8E5M2) {
      launch_fp8<T, kernels::Fp8E5M2>(p, plan, blocks, first, stream);
    } else if (plan.vectorised) {
      reshape_and_cache_kernel<T, uint4><<<blocks, kCacheThreads, 0, stream>>>(p, first);
    } else {
      reshape_and_cache_kernel<T, T><<<blocks, kCacheThreads, 0, stream>>>(p, first);
    }
    DJL_ATTN_CUDA_CHECK_LAUNCH("reshape_and_cache_kernel");
  }
}

}  // namespace

void run_reshape_and_cache_cuda(const ReshapeAndCacheParams& p) {
  const CachePlan plan = plan_reshape_and_cache(p);
  const int device = cuda::device_of(p.key);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return launch<float>(p, plan, stream);
    case ElementType::kFloat16: return launch<__half>(p, plan, stream);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(p, plan, stream);
  }
}

}  // namespace djl_attn::paged
