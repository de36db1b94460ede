// reshape_and_cache on CUDA: one thread block per token copies its Hkv key and value rows into
// the token's slot, 16 bytes per thread per step where alignment allows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_cuda.h"

namespace djl_attn::paged {
namespace {

constexpr int kThreads = 128;

// V is the unit each thread moves: uint4 (16 bytes) or T itself.
template <typename T, typename V>
__global__ void __launch_bounds__(kThreads) reshape_and_cache_kernel(ReshapeAndCacheParams p) {
  constexpr int kPerUnit = sizeof(V) / sizeof(T);
  const int64_t token = blockIdx.x;
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;
  const int64_t units = p.head_dim / kPerUnit;  // per row
  const int64_t row_stride = p.heads_kv * p.head_dim;
  const T* key = static_cast<const T*>(p.key) + token * p.key_token_stride;
  const T* value = static_cast<const T*>(p.value) + token * p.value_token_stride;
  T* key_cache = static_cast<T*>(p.key_cache) + slot * row_stride;
  T* value_cache = static_cast<T*>(p.value_cache) + slot * row_stride;
  for (int64_t i = threadIdx.x; i < p.heads_kv * units; i += kThreads) {
    const int64_t h = i / units, u = (i % units) * kPerUnit;
    *reinterpret_cast<V*>(key_cache + h * p.head_dim + u) =
        *reinterpret_cast<const V*>(key + h * p.key_head_stride + u);
    *reinterpret_cast<V*>(value_cache + h * p.head_dim + u) =
        *reinterpret_cast<const V*>(value + h * p.value_head_stride + u);
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

template <typename T>
void launch(const ReshapeAndCacheParams& p, cudaStream_t stream) {
  const int64_t bytes_per_row = p.head_dim * static_cast<int64_t>(sizeof(T));
  const bool vector = bytes_per_row % 16 == 0 && aligned16(p.key) && aligned16(p.value) &&
                      aligned16(p.key_cache) && aligned16(p.value_cache) &&
                      (p.key_token_stride * sizeof(T)) % 16 == 0 &&
                      (p.key_head_stride * sizeof(T)) % 16 == 0 &&
                      (p.value_token_stride * sizeof(T)) % 16 == 0 &&
                      (p.value_head_stride * sizeof(T)) % 16 == 0;
  if (p.num_tokens > 0x7fffffffLL) {
    fail_invalid("reshape_and_cache: key: expected at most 2^31 - 1 tokens on CUDA, got ",
                 p.num_tokens);
  }
  const unsigned blocks = static_cast<unsigned>(p.num_tokens);
  if (vector) {
    reshape_and_cache_kernel<T, uint4><<<blocks, kThreads, 0, stream>>>(p);
  } else {
    reshape_and_cache_kernel<T, T><<<blocks, kThreads, 0, stream>>>(p);
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("reshape_and_cache_kernel");
}

}  // namespace

void run_reshape_and_cache_cuda(const ReshapeAndCacheParams& p) {
  const int device = cuda::device_of(p.key);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return launch<float>(p, stream);
    case ElementType::kFloat16: return launch<__half>(p, stream);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(p, stream);
  }
}

}  // namespace djl_attn::paged
