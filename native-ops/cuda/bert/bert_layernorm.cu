// add_bias_residual_layernorm on CUDA: one read of x and residual, one write of the output,
// float32 two-pass statistics over a row held on chip (registers, or shared memory for rows
// too long for one warp's registers).

#include <algorithm>

#include "cuda/bert/bert_cuda.cuh"
#include "cuda/bert/bert_dispatch.cuh"
#include "cuda/bert/bert_vector.cuh"
#include "cuda/common/cuda_check.h"

namespace djl_attn::bert {
namespace {

constexpr int kWarpsPerBlock = 4;
// Block-per-row: up to 512 threads, each taking every 512th vector of the row.
constexpr int kMaxBlockThreads = 512;

// Adds the bias (when given) and the residual to N elements of x at channel c.
template <typename T, typename P, int N>
__device__ __forceinline__ void load_sum(const LayerNormParams& p, int64_t offset, int64_t c,
                                         float (&v)[N]) {
  float r[N];
  load_floats<T, N>(static_cast<const T*>(p.x) + offset, v);
  load_floats<T, N>(static_cast<const T*>(p.residual) + offset, r);
#pragma unroll
  for (int e = 0; e < N; ++e) v[e] += r[e];
  if (p.bias != nullptr) {
    float b[N];
    load_floats<P, N>(static_cast<const P*>(p.bias) + c, b);
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] += b[e];
  }
}

template <typename T, typename P, int N>
__device__ __forceinline__ void store_normalized(const LayerNormParams& p, int64_t offset,
                                                 int64_t c, const float (&v)[N], float mean,
                                                 float rstd) {
  float g[N], b[N], y[N];
  load_floats<P, N>(static_cast<const P*>(p.gamma) + c, g);
  load_floats<P, N>(static_cast<const P*>(p.beta) + c, b);
#pragma unroll
  for (int e = 0; e < N; ++e) y[e] = (v[e] - mean) * rstd * g[e] + b[e];
  store_floats<T, N>(static_cast<T*>(p.out) + offset, y);
}

// One warp per row; lane l holds vectors l, l + 32, ... (at most kVecs of them) in registers.
template <typename T, typename P, int N, int kVecs>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    layernorm_warp_kernel(LayerNormParams p) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t vecs = p.channels / N;
  // Divided, not multiplied by 1/C: a constant row then gives mean == value exactly.
  const float channels = static_cast<float>(p.channels);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  // Whole warps share a row, so every shuffle below runs with all 32 lanes.
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       row < p.rows; row += step) {
    const int64_t base = row * p.channels;
    float v[kVecs][N];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int64_t j = lane + i * kWarpSize;
      if (j < vecs) {
        load_sum<T, P, N>(p, base + j * N, j * N, v[i]);
#pragma unroll
        for (int e = 0; e < N; ++e) sum += v[i][e];
      }
    }
    const float mean = warp_sum(sum) / channels;
    float squares = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (lane + i * kWarpSize < vecs) {
#pragma unroll
        for (int e = 0; e < N; ++e) {
          const float d = v[i][e] - mean;
          squares += d * d;
        }
      }
    }
    const float rstd = rsqrtf(warp_sum(squares) / channels + p.eps);
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int64_t j = lane + i * kWarpSize;
      if (j < vecs) store_normalized<T, P, N>(p, base + j * N, j * N, v[i], mean, rstd);
    }
  }
}

// One block per row; the row sum x + bias + residual is staged in shared memory as float32,
// element e of vector j at [e * vecs + j] so that consecutive threads touch consecutive banks.
// Each thread reads back only what it wrote, so the staging needs no barrier of its own.
template <typename T, typename P, int N>
__global__ void __launch_bounds__(kMaxBlockThreads) layernorm_block_kernel(LayerNormParams p) {
  extern __shared__ float staged[];  // [C]
  __shared__ float partial[kMaxBlockThreads / kWarpSize];
  const int64_t vecs = p.channels / N;
  // Divided, not multiplied by 1/C: a constant row then gives mean == value exactly.
  const float channels = static_cast<float>(p.channels);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * p.channels;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < vecs; j += blockDim.x) {
      float v[N];
      load_sum<T, P, N>(p, base + j * N, j * N, v);
#pragma unroll
      for (int e = 0; e < N; ++e) {
        staged[e * vecs + j] = v[e];
        sum += v[e];
      }
    }
    const float mean = block_sum(sum, partial) / channels;
    float squares = 0.f;
    for (int64_t j = threadIdx.x; j < vecs; j += blockDim.x) {
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float d = staged[e * vecs + j] - mean;
        squares += d * d;
      }
    }
    const float rstd = rsqrtf(block_sum(squares, partial) / channels + p.eps);
    for (int64_t j = threadIdx.x; j < vecs; j += blockDim.x) {
      float v[N];
#pragma unroll
      for (int e = 0; e < N; ++e) v[e] = staged[e * vecs + j];
      store_normalized<T, P, N>(p, base + j * N, j * N, v, mean, rstd);
    }
  }
}

template <typename T, typename P, int N, int kVecs>
void launch_warp(const LayerNormParams& p, cudaStream_t stream) {
  const int64_t blocks = (p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  layernorm_warp_kernel<T, P, N, kVecs>
      <<<grid_size(blocks), kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  DJL_ATTN_CUDA_CHECK_LAUNCH("layernorm_warp_kernel");
}

template <typename T, typename P, int N>
void launch_block(const LayerNormParams& p, int device, cudaStream_t stream) {
  const int64_t vecs = p.channels / N;
  const int threads = static_cast<int>(
      std::min<int64_t>(kMaxBlockThreads, (vecs + kWarpSize - 1) / kWarpSize * kWarpSize));
  const int64_t bytes = p.channels * static_cast<int64_t>(sizeof(float));
  constexpr int64_t kDefaultSharedBytes = 48 * 1024;
  auto kernel = layernorm_block_kernel<T, P, N>;
  if (bytes > kDefaultSharedBytes) {
    // Rows above 12288 channels need the opt-in shared memory of the device (227 KB on H100,
    // 163 KB on A100); the static partial sums take the rest.
    int optin = 0;
    DJL_ATTN_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const int64_t limit = optin - static_cast<int64_t>(sizeof(float)) * (kMaxBlockThreads / kWarpSize);
    if (bytes > limit) {
      fail_invalid("add_bias_residual_layernorm: x: expected a last dim C <= ",
                   limit / static_cast<int64_t>(sizeof(float)),
                   " on this GPU (the row is staged in shared memory), got ", p.channels);
    }
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes)));
  }
  kernel<<<grid_size(p.rows), threads, static_cast<size_t>(bytes), stream>>>(p);
  DJL_ATTN_CUDA_CHECK_LAUNCH("layernorm_block_kernel");
}

// Registers per lane grow with kVecs * N floats, so short rows get a short array: three tiers.
template <typename T, typename P, int N>
void launch_layernorm(const LayerNormParams& p, int device, cudaStream_t stream) {
  const int64_t vecs = p.channels / N;
  // Scalar rows (odd C, unaligned views) are rare: one warp tier for them keeps the build lean.
  if constexpr (N > 1) {
    if (vecs <= kWarpSize) return launch_warp<T, P, N, 1>(p, stream);
    if (vecs <= 4 * kWarpSize) return launch_warp<T, P, N, 4>(p, stream);
  }
  if (vecs <= 8 * kWarpSize) return launch_warp<T, P, N, 8>(p, stream);
  launch_block<T, P, N>(p, device, stream);
}

template <typename T, typename P>
void run_typed(const LayerNormParams& p) {
  constexpr int kVector = vector_width<T>();
  const int device = pointer_device(p.x);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  // 16-byte vectors need C to be a multiple of the width and every base pointer aligned (rows
  // then stay aligned); anything else takes the scalar kernels.
  const bool vectorised = p.channels % kVector == 0 && aligned(p.x, 16) &&
                          aligned(p.residual, 16) && aligned(p.out, 16) &&
                          aligned(p.gamma, kVector * sizeof(P)) &&
                          aligned(p.beta, kVector * sizeof(P)) &&
                          (p.bias == nullptr || aligned(p.bias, kVector * sizeof(P)));
  if (vectorised) {
    launch_layernorm<T, P, kVector>(p, device, stream);
  } else {
    launch_layernorm<T, P, 1>(p, device, stream);
  }
}

}  // namespace

void run_layernorm_cuda(const LayerNormParams& params) {
  DJL_BERT_DISPATCH_TYPES(params.dtype, params.param_dtype, "add_bias_residual_layernorm",
                          [&] { run_typed<T, P>(params); });
}

}  // namespace djl_attn::bert
