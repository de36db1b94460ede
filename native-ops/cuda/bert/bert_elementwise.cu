// add_bias_gelu and add_bias_residual_affine on CUDA: one read and one write of the activations,
// a 16-byte vector per thread and step, the per-channel vectors read through L1/L2 (C elements
// shared by every row).

#include <cmath>
#include <type_traits>

#include "cuda/bert/bert_cuda.cuh"
#include "cuda/bert/bert_dispatch.cuh"
#include "cuda/bert/bert_plan.h"
#include "cuda/bert/bert_vector.cuh"
#include "cuda/common/activations.cuh"
#include "cuda/common/cuda_check.h"

namespace djl_attn::bert {
namespace {
using cuda::gelu_tanh;

constexpr int kThreads = kElementwiseThreads;

__device__ __forceinline__ float gelu_erf(float v) {
  return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

// The same for float16 outputs, at about half the instructions of erff: erf by Abramowitz &
// Stegun 7.1.26 (absolute error <= 1.5e-7) with the fast reciprocal and exponential, and
// 1 + erf(a) formed without cancellation on the negative side, where it is q = poly(t) exp(-a^2)
// itself. The relative error of q grows in the negative tail: 0.05% at v = -4 (output 1.3e-4,
// whose float16 ulp is 0.1%: at most one ulp off), 0.16% at -5 and 1% at -8, where float16
// outputs are subnormal (ulp 4% and more) or 0. bfloat16 keeps float32's exponent range and would
// show the tail error, so it stays on erff. The erff form made this kernel compute-bound on an H200
// (20 us for [4096, 3072] float16, 2.5 TB/s).
__device__ __forceinline__ float gelu_erf_fast(float v) {
  const float a = fabsf(v) * 0.70710678118654752f;
  const float t = __fdividef(1.f, fmaf(0.3275911f, a, 1.f));
  const float poly =
      t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 1.061405429f, -1.453152027f), 1.421413741f),
                       -0.284496736f),
               0.254829592f);
  const float q = poly * __expf(-a * a);
  return 0.5f * v * (v < 0.f ? q : 2.f - q);
}

template <typename T, typename P, int N, Epilogue kEpilogue>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(ElementwiseParams p) {
  const int64_t row_vecs = p.channels / N;
  const int64_t total = p.rows * row_vecs;
  // The channel of a vector is its index modulo the row; 32-bit division is several times
  // cheaper than 64-bit and covers every tensor below 2^32 vectors.
  const bool narrow = total <= 0xffffffffLL;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += step) {
    const int64_t c =
        N * (narrow ? static_cast<int64_t>(static_cast<uint32_t>(i) % static_cast<uint32_t>(row_vecs))
                    : i % row_vecs);
    float v[N];
    load_floats<T, N>(static_cast<const T*>(p.x) + i * N, v);
    if (p.bias != nullptr) {
      float b[N];
      load_floats<P, N>(static_cast<const P*>(p.bias) + c, b);
#pragma unroll
      for (int e = 0; e < N; ++e) v[e] += b[e];
    }
    if constexpr (kEpilogue == Epilogue::kAffine) {
      float r[N], scale[N], shift[N];
      load_floats<T, N>(static_cast<const T*>(p.residual) + i * N, r);
      load_floats<P, N>(static_cast<const P*>(p.scale) + c, scale);
      load_floats<P, N>(static_cast<const P*>(p.shift) + c, shift);
#pragma unroll
      for (int e = 0; e < N; ++e) v[e] = (v[e] + r[e]) * scale[e] + shift[e];
    } else if constexpr (kEpilogue == Epilogue::kGeluErf) {
#pragma unroll
      for (int e = 0; e < N; ++e) {
        v[e] = std::is_same_v<T, __half> ? gelu_erf_fast(v[e]) : gelu_erf(v[e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) v[e] = gelu_tanh(v[e]);
    }
    store_floats<T, N>(static_cast<T*>(p.out) + i * N, v);
  }
}

template <typename T, typename P, int N>
void launch(const ElementwiseParams& p, const ElementwisePlan& plan, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(plan.blocks);
  switch (p.epilogue) {  // every Epilogue
    case Epilogue::kGeluErf:
      elementwise_kernel<T, P, N, Epilogue::kGeluErf><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Epilogue::kGeluTanh:
      elementwise_kernel<T, P, N, Epilogue::kGeluTanh><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Epilogue::kAffine:
      elementwise_kernel<T, P, N, Epilogue::kAffine><<<blocks, kThreads, 0, stream>>>(p);
      break;
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH("elementwise_kernel");
}

template <typename T, typename P>
void run_typed(const ElementwiseParams& p, const ElementwisePlan& plan, cudaStream_t stream) {
  switch (plan.width) {
    case VectorWidth::k16Bytes: return launch<T, P, vector_width<T>()>(p, plan, stream);
    case VectorWidth::kScalar: return launch<T, P, 1>(p, plan, stream);
  }
}

}  // namespace

void run_elementwise_cuda(const ElementwiseParams& params) {
  const ElementwisePlan plan = plan_elementwise(params);
  const int device = pointer_device(params.x);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  DJL_BERT_DISPATCH_TYPES(params.dtype, params.param_dtype,
                          [&] { run_typed<T, P>(params, plan, stream); });
}

}  // namespace djl_attn::bert
