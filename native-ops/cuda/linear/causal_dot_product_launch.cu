// Launches the causal_dot_product kernel variant that the plan (causal_dot_product_plan.h)
// chooses for a problem and a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/switches.h"
#include "cuda/linear/causal_dot_product_cuda.cuh"
#include "cuda/linear/causal_dot_product_kernels.cuh"
#include "cuda/linear/causal_dot_product_plan.h"

namespace djl_attn::linear {

// Instantiated in causal_dot_product_{f32,f16,bf16}.cu.
extern template void launch_per_thread<float>(const CausalDotProductParams&, LinearRows, bool,
                                              cudaStream_t);
extern template void launch_per_thread<__half>(const CausalDotProductParams&, LinearRows, bool,
                                               cudaStream_t);
extern template void launch_per_thread<__nv_bfloat16>(const CausalDotProductParams&, LinearRows,
                                                      bool, cudaStream_t);
extern template void launch_low_occupancy<float>(const CausalDotProductParams&, LinearRows, int,
                                                 bool, cudaStream_t);
extern template void launch_low_occupancy<__half>(const CausalDotProductParams&, LinearRows, int,
                                                  bool, cudaStream_t);
extern template void launch_low_occupancy<__nv_bfloat16>(const CausalDotProductParams&,
                                                         LinearRows, int, bool, cudaStream_t);
extern template void launch_chunked<__half>(const CausalDotProductParams&, ChunkedDim,
                                            ChunkedCols, bool, cudaStream_t);
extern template void launch_chunked<__nv_bfloat16>(const CausalDotProductParams&, ChunkedDim,
                                                   ChunkedCols, bool, cudaStream_t);

namespace {

bool loads_16_bytes(const void* ptr, int64_t element_size, int64_t s0, int64_t s1,
                    int64_t s2) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (s0 * element_size) % 16 == 0 &&
         (s1 * element_size) % 16 == 0 && (s2 * element_size) % 16 == 0;
}

template <typename T>
void run_typed(const CausalDotProductParams& p, const LinearPlan& plan, cudaStream_t stream) {
  // 16-byte loads need every row of q, k and v to start on a 16-byte boundary; views with odd
  // offsets or strides take the element-wise path of the same kernels.
  const int64_t size = sizeof(T);
  const bool vectorised =
      loads_16_bytes(p.q, size, p.q_batch_stride, p.q_head_stride, p.q_seq_stride) &&
      loads_16_bytes(p.k, size, p.k_batch_stride, p.k_head_stride, p.k_seq_stride) &&
      loads_16_bytes(p.v, size, p.v_batch_stride, p.v_head_stride, p.v_seq_stride);
  if (plan.variant == LinearVariant::kPerThread) {
    launch_per_thread<T>(p, plan.rows, vectorised, stream);
  } else if (plan.variant == LinearVariant::kChunked) {
    // The plan names the chunked kernel for 2-byte elements only (no float32 instantiation).
    if constexpr (sizeof(T) == 2) {
      launch_chunked<T>(p, plan.chunked_dim, plan.chunked_cols, vectorised, stream);
    }
  } else {
    launch_low_occupancy<T>(p, plan.rows, plan.warps, vectorised, stream);
  }
}

}  // namespace

void run_causal_dot_product_cuda(const CausalDotProductParams& params, void* stream, int device) {
  const LinearPlan plan = plan_causal_dot_product(
      params.batch * params.heads, params.seqlen, params.dim_qk, params.dim_v,
      element_size(params.dtype), cuda::cuda_switches().linear, cuda::device_facts(device));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params, plan, s);
    case ElementType::kFloat16: return run_typed<__half>(params, plan, s);
    case ElementType::kBFloat16: return run_typed<__nv_bfloat16>(params, plan, s);
  }
}

std::string causal_dot_product_plan(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                    int64_t dim_v, int64_t element_size, int device) {
  return describe(plan_causal_dot_product(batch_heads, seqlen, dim_qk, dim_v, element_size,
                                          cuda::cuda_switches().linear,
                                          cuda::device_facts(device)));
}

}  // namespace djl_attn::linear

// For benchmarks (through ctypes): the variant the launcher would pick on `device`, or
// "error: ...". The same choice for a described GPU, without one, is in libdjl_attn_plans.so
// (tests only).
extern "C" const char* djl_attn_causal_dot_product_plan(int64_t batch_heads, int64_t seqlen,
                                                         int64_t dim_qk, int64_t dim_v,
                                                         int32_t element_size, int32_t device) {
  static thread_local std::string result;
  try {
    result = djl_attn::linear::causal_dot_product_plan(batch_heads, seqlen, dim_qk, dim_v,
                                                       element_size, device);
  } catch (const std::exception& e) {
    result = std::string("error: ") + e.what();
  }
  return result.c_str();
}
