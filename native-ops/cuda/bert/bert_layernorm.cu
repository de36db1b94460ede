// add_bias_residual_layernorm on CUDA: one read of x and residual, one write of the output,
// float32 two-pass statistics over a row held on chip (registers, or shared memory for rows
// too long for one warp's registers); rows longer than the shared memory holds are read from
// global memory in each pass. The plan (bert_plan.h) picks the kernel, vector width and grid.

#include "cuda/bert/bert_cuda.cuh"
#include "cuda/bert/bert_dispatch.cuh"
#include "cuda/bert/bert_plan.h"
#include "cuda/bert/bert_vector.cuh"
#include "cuda/common/cuda_check.h"

namespace djl_attn::bert {
namespace {

constexpr int kWarpsPerBlock = kLayerNormWarps;
constexpr int kMaxBlockThreads = kLayerNormMaxThreads;

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

// One block per row. kStaged: the row sum x + bias + residual is staged in shared memory as
// float32, element e of vector j at [e * vecs + j] so that consecutive threads touch consecutive
// banks; each thread reads back only what it wrote, so the staging needs no barrier of its own.
// Otherwise (rows longer than the shared memory holds) each pass recomputes the sum from global
// memory: the same float32 values, so the same result, at three reads of the row.
template <typename T, typename P, int N, bool kStaged>
__global__ void __launch_bounds__(kMaxBlockThreads) layernorm_block_kernel(LayerNormParams p) {
  extern __shared__ float staged[];  // [C] when kStaged
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
        if constexpr (kStaged) staged[e * vecs + j] = v[e];
        sum += v[e];
      }
    }
    const float mean = block_sum(sum, partial) / channels;
    // The later passes read the row sum back from shared memory, or recompute it.
    float squares = 0.f;
    for (int64_t j = threadIdx.x; j < vecs; j += blockDim.x) {
      float v[N];  // streamed only
      if constexpr (!kStaged) load_sum<T, P, N>(p, base + j * N, j * N, v);
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float d = (kStaged ? staged[e * vecs + j] : v[e]) - mean;
        squares += d * d;
      }
    }
    const float rstd = rsqrtf(block_sum(squares, partial) / channels + p.eps);
    for (int64_t j = threadIdx.x; j < vecs; j += blockDim.x) {
      float v[N];
      if constexpr (kStaged) {
#pragma unroll
        for (int e = 0; e < N; ++e) v[e] = staged[e * vecs + j];
      } else {
        load_sum<T, P, N>(p, base + j * N, j * N, v);
      }
      store_normalized<T, P, N>(p, base + j * N, j * N, v, mean, rstd);
    }
  }
}

template <typename T, typename P, int N, int kVecs>
void launch_warp(const LayerNormParams& p, const LayerNormPlan& plan, cudaStream_t stream) {
  layernorm_warp_kernel<T, P, N, kVecs>
      <<<static_cast<unsigned>(plan.blocks), plan.threads, 0, stream>>>(p);
  DJL_ATTN_CUDA_CHECK_LAUNCH("layernorm_warp_kernel");
}

template <typename T, typename P, int N, bool kStaged>
void launch_block(const LayerNormParams& p, const LayerNormPlan& plan, cudaStream_t stream) {
  auto kernel = layernorm_block_kernel<T, P, N, kStaged>;
  if (plan.smem_opt_in) {
    // The attribute is per device: set on every call (a host-side write, no synchronisation).
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(plan.smem_bytes)));
  }
  kernel<<<static_cast<unsigned>(plan.blocks), plan.threads,
           static_cast<size_t>(plan.smem_bytes), stream>>>(p);
  DJL_ATTN_CUDA_CHECK_LAUNCH("layernorm_block_kernel");
}

// The plan's kernel: every LayerNormKernel, at T's 16-byte width W or one element per access.
template <typename T, typename P>
void run_typed(const LayerNormParams& p, const LayerNormPlan& plan, cudaStream_t stream) {
  constexpr int W = vector_width<T>();
  switch (plan.kernel) {
    case LayerNormKernel::kWarp1: return launch_warp<T, P, W, 1>(p, plan, stream);
    case LayerNormKernel::kWarp4: return launch_warp<T, P, W, 4>(p, plan, stream);
    case LayerNormKernel::kWarp8: return launch_warp<T, P, W, 8>(p, plan, stream);
    case LayerNormKernel::kBlockStaged: return launch_block<T, P, W, true>(p, plan, stream);
    case LayerNormKernel::kScalarWarp8: return launch_warp<T, P, 1, 8>(p, plan, stream);
    case LayerNormKernel::kScalarBlockStaged: return launch_block<T, P, 1, true>(p, plan, stream);
    case LayerNormKernel::kScalarBlockStreamed:
      return launch_block<T, P, 1, false>(p, plan, stream);
  }
}

}  // namespace

void run_layernorm_cuda(const LayerNormParams& params) {
  const int device = pointer_device(params.x);
  cuda::DeviceGuard guard(device);
  const LayerNormPlan plan = plan_layernorm(params, cuda::device_facts(device));
  cudaStream_t stream = cuda::current_stream(device);
  DJL_BERT_DISPATCH_TYPES(params.dtype, params.param_dtype,
                          [&] { run_typed<T, P>(params, plan, stream); });
}

}  // namespace djl_attn::bert
