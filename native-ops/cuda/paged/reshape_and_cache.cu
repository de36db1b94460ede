// reshape_and_cache on CUDA: one thread block per token copies its Hkv key and value rows into
// the token's slot, 16 bytes per thread per step where the plan (paged_plan.h) finds the rows
// aligned for it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_cuda.h"
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
  const int64_t units = p.head_dim / kPerUnit;  // per row
  const int64_t row_stride = p.heads_kv * p.head_dim;
  const T* key = static_cast<const T*>(p.key) + token * p.key_token_stride;
  const T* value = static_cast<const T*>(p.value) + token * p.value_token_stride;
  T* key_cache = static_cast<T*>(p.key_cache) + slot * row_stride;
  T* value_cache = static_cast<T*>(p.value_cache) + slot * row_stride;
  for (int64_t i = threadIdx.x; i < p.heads_kv * units; i += kCacheThreads) {
    const int64_t h = i / units, u = (i % units) * kPerUnit;
    *reinterpret_cast<V*>(key_cache + h * p.head_dim + u) =
        *reinterpret_cast<const V*>(key + h * p.key_head_stride + u);
    *reinterpret_cast<V*>(value_cache + h * p.head_dim + u) =
        *reinterpret_cast<const V*>(value + h * p.value_head_stride + u);
  }
}

// One launch per slice of plan.blocks tokens (a single one below CUDA's 2^31 - 1 grid limit).
template <typename T>
void launch(const ReshapeAndCacheParams& p, const CachePlan& plan, cudaStream_t stream) {
  for (int64_t first = 0; first < p.num_tokens; first += plan.blocks) {
    const unsigned blocks = static_cast<unsigned>(std::min(plan.blocks, p.num_tokens - first));
    if (plan.vectorised) {
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
