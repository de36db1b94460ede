// Device helpers shared by the BERT kernels: float conversion of the storage types, 16-byte
// vector loads and stores (the seed's half2 idea generalised: 4 floats or 8 halves per load),
// warp and block sums, and the device an operator launches on.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"

namespace djl_attn::bert {

constexpr int kWarpSize = 32;

template <typename E>
__device__ __forceinline__ float to_f(E x) {
  return cuda::to_float(x);
}
template <typename E>
__device__ __forceinline__ E from_f(float x) {
  return cuda::from_float<E>(x);
}

// N elements moved as one aligned access (two for 32-byte packs of float parameters).
template <typename E, int N>
struct alignas(sizeof(E) * N) Pack {
  E v[N];
};

template <typename E, int N>
__device__ __forceinline__ void load_floats(const E* ptr, float (&out)[N]) {
  const Pack<E, N> pack = *reinterpret_cast<const Pack<E, N>*>(ptr);
#pragma unroll
  for (int e = 0; e < N; ++e) out[e] = to_f(pack.v[e]);
}

template <typename E, int N>
__device__ __forceinline__ void store_floats(E* ptr, const float (&in)[N]) {
  Pack<E, N> pack;
#pragma unroll
  for (int e = 0; e < N; ++e) pack.v[e] = from_f<E>(in[e]);
  *reinterpret_cast<Pack<E, N>*>(ptr) = pack;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the total. `partial` holds
// one float per warp.
__device__ __forceinline__ float block_sum(float x, float* partial) {
  x = warp_sum(x);
  const int warp = threadIdx.x / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) partial[warp] = x;
  __syncthreads();
  float total = 0.f;
  const int warps = blockDim.x / kWarpSize;
  for (int w = 0; w < warps; ++w) total += partial[w];
  // The next call overwrites `partial`: everyone must have read it first.
  __syncthreads();
  return total;
}

// Elements per 16-byte vector.
template <typename T>
constexpr int vector_width() {
  return 16 / static_cast<int>(sizeof(T));
}

// The device that holds `ptr` (the operators launch there, on PyTorch's current stream).
inline int pointer_device(const void* ptr) { return cuda::device_of(ptr); }

}  // namespace djl_attn::bert
