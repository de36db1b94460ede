// Chooses the causal_dot_product kernel variant for a problem and a GPU, and launches it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/linear/causal_dot_product_cuda.cuh"
#include "cuda/linear/causal_dot_product_kernels.cuh"

namespace djl_attn::linear {

// Instantiated in causal_dot_product_{f32,f16,bf16}.cu.
extern template void launch_per_thread<float>(const CausalDotProductParams&, bool, cudaStream_t);
extern template void launch_per_thread<__half>(const CausalDotProductParams&, bool, cudaStream_t);
extern template void launch_per_thread<__nv_bfloat16>(const CausalDotProductParams&, bool,
                                                      cudaStream_t);
extern template void launch_low_occupancy<float>(const CausalDotProductParams&, int, bool,
                                                 cudaStream_t);
extern template void launch_low_occupancy<__half>(const CausalDotProductParams&, int, bool,
                                                  cudaStream_t);
extern template void launch_low_occupancy<__nv_bfloat16>(const CausalDotProductParams&, int, bool,
                                                         cudaStream_t);
extern template void launch_chunked<__half>(const CausalDotProductParams&, bool, cudaStream_t);
extern template void launch_chunked<__nv_bfloat16>(const CausalDotProductParams&, bool,
                                                   cudaStream_t);

namespace {

enum class Variant { kAuto, kPerThread, kLowOccupancy, kChunked };

// DJL_ATTN_LINEAR_KERNEL, read on every call so that tests and benchmarks can switch variants
// within one process.
Variant requested_variant() {
  const char* value = std::getenv("DJL_ATTN_LINEAR_KERNEL");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return Variant::kAuto;
  if (std::strcmp(value, "per_thread") == 0) return Variant::kPerThread;
  if (std::strcmp(value, "low_occupancy") == 0) return Variant::kLowOccupancy;
  if (std::strcmp(value, "chunked") == 0) return Variant::kChunked;
  fail_invalid("causal_dot_product: DJL_ATTN_LINEAR_KERNEL: expected one of auto, per_thread, "
               "low_occupancy, chunked, got ", value);
}

// About this many resident warps per SM hide the latency of the low-occupancy kernel's loads and
// barriers; more warps per block only lengthen each iteration.
constexpr int64_t kTargetWarpsPerSm = 32;

struct Plan {
  Variant variant;
  int warps;  // low_occupancy only
};

// Shortest L at which auto runs the chunked kernel: from two chunks on, the next chunk's loads
// overlap this chunk's tensor-core work; below that both kernels take a few microseconds.
constexpr int64_t kChunkedMinLength = 2 * kChunk;
// With fewer per-thread blocks than SMs, the chunked kernel only above this E (see make_plan).
constexpr int64_t kChunkedSmallGridMinDim = 64;

// smem_limit: the device's opt-in shared memory per block (the chunked kernel is chosen only
// where it fits; forced with DJL_ATTN_LINEAR_KERNEL=chunked it fails with the sizes instead).
Plan make_plan(int64_t batch_heads, int64_t seqlen, int64_t dim_qk, int64_t dim_v,
               int64_t element_size, int sm_count, int64_t smem_limit) {
  Plan plan{requested_variant(), 0};
  // The tensor-core kernel takes float16/bfloat16 with E <= 128; other requests for it run the
  // per-thread kernel.
  if (plan.variant == Variant::kChunked && (element_size != 2 || dim_qk > kChunkMaxDim)) {
    plan.variant = Variant::kPerThread;
  }
  const int64_t per_thread_blocks =
      batch_heads * ((dim_v + per_thread_columns(dim_qk) - 1) / per_thread_columns(dim_qk));
  if (plan.variant == Variant::kAuto) {
    // The per-thread kernel does no redundant work but walks L serially in each block; once its
    // blocks reach every SM, splitting time across warps only adds the low-occupancy kernel's
    // re-reads of q and k (once per column) and its barriers. In that regime the chunked kernel
    // does the same work on tensor cores (and has as many or more blocks per head: one per 64
    // columns against one per 32 at E > 64), so it takes over wherever it applies.
    //
    // Below that the low-occupancy kernel's B·H·M blocks fill the GPU where the chunked
    // kernel's B·H·ceil(M / 64) cannot, and it wins up to E = 64 (H200, B·H = 4, L = 1k-64k:
    // within 3% of chunked at E = 64, 7-11% ahead at E = 32); at E > 64 its per-column blocks
    // each walk the whole state column and the chunked kernel is 1.3x faster at every L >= 1k
    // (docs/benchmarks.md, causal_dot_product table).
    const bool chunked_fits = element_size == 2 && dim_qk <= kChunkMaxDim &&
                              seqlen >= kChunkedMinLength &&
                              static_cast<int64_t>(chunked_smem_bytes(dim_qk, dim_v)) <= smem_limit;
    if (per_thread_blocks < sm_count) {
      plan.variant = chunked_fits && dim_qk > kChunkedSmallGridMinDim ? Variant::kChunked
                                                                       : Variant::kLowOccupancy;
    } else if (chunked_fits) {
      plan.variant = Variant::kChunked;
    } else {
      plan.variant = Variant::kPerThread;
    }
  }
  if (plan.variant == Variant::kLowOccupancy) {
    const int64_t blocks = batch_heads * dim_v;
    const int64_t budget = kTargetWarpsPerSm * sm_count / (blocks > 0 ? blocks : 1);
    int warps = 4;
    while (warps * 2 <= budget && warps * 2 <= low_occupancy_max_warps(dim_qk)) warps *= 2;
    plan.warps = warps;
  }
  return plan;
}

std::string describe(const Plan& plan) {
  if (plan.variant == Variant::kPerThread) return "per_thread";
  if (plan.variant == Variant::kChunked) return "chunked";
  return "low_occupancy/" + std::to_string(plan.warps) + "w";
}

bool aligned16(const void* ptr, int64_t element_size, int64_t s0, int64_t s1, int64_t s2) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (s0 * element_size) % 16 == 0 &&
         (s1 * element_size) % 16 == 0 && (s2 * element_size) % 16 == 0;
}

template <typename T>
void run_typed(const CausalDotProductParams& p, const Plan& plan, cudaStream_t stream) {
  // 16-byte loads need every row of q, k and v to start on a 16-byte boundary; views with odd
  // offsets or strides take the element-wise path of the same kernels.
  const int64_t size = sizeof(T);
  const bool vectorised =
      aligned16(p.q, size, p.q_batch_stride, p.q_head_stride, p.q_seq_stride) &&
      aligned16(p.k, size, p.k_batch_stride, p.k_head_stride, p.k_seq_stride) &&
      aligned16(p.v, size, p.v_batch_stride, p.v_head_stride, p.v_seq_stride);
  if (plan.variant == Variant::kPerThread) {
    launch_per_thread<T>(p, vectorised, stream);
  } else if (plan.variant == Variant::kChunked) {
    if constexpr (sizeof(T) == 2) {
      launch_chunked<T>(p, vectorised, stream);
    } else {
      fail_native("causal_dot_product: no chunked kernel for float32");  // make_plan excludes it
    }
  } else {
    launch_low_occupancy<T>(p, plan.warps, vectorised, stream);
  }
}

int64_t smem_optin(int device) {
  int bytes = 0;
  DJL_ATTN_CUDA_CHECK(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

}  // namespace

void run_causal_dot_product_cuda(const CausalDotProductParams& params, void* stream, int device) {
  const int64_t element_size = params.dtype == ElementType::kFloat32 ? 4 : 2;
  const Plan plan =
      make_plan(params.batch * params.heads, params.seqlen, params.dim_qk, params.dim_v,
                element_size, cuda::multiprocessor_count(device), smem_optin(device));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params, plan, s);
    case ElementType::kFloat16: return run_typed<__half>(params, plan, s);
    case ElementType::kBFloat16: return run_typed<__nv_bfloat16>(params, plan, s);
  }
}

std::string causal_dot_product_plan(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                    int64_t dim_v, int64_t element_size, int device) {
  return describe(make_plan(batch_heads, seqlen, dim_qk, dim_v, element_size,
                            cuda::multiprocessor_count(device), smem_optin(device)));
}

std::string causal_dot_product_plan_for(int64_t batch_heads, int64_t seqlen, int64_t dim_qk,
                                        int64_t dim_v, int64_t element_size, int sm_count,
                                        int64_t smem_limit) {
  return describe(make_plan(batch_heads, seqlen, dim_qk, dim_v, element_size, sm_count,
                            smem_limit));
}

}  // namespace djl_attn::linear

// For benchmarks (through ctypes): the variant the launcher would pick, or "error: ...".
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

// For tests: the same choice for a hypothetical GPU with `sm_count` SMs and `smem_limit` bytes of
// opt-in shared memory per block (no device needed), or "error: ...".
extern "C" const char* djl_attn_causal_dot_product_plan_for(int64_t batch_heads, int64_t seqlen,
                                                             int64_t dim_qk, int64_t dim_v,
                                                             int32_t element_size, int32_t sm_count,
                                                             int64_t smem_limit) {
  static thread_local std::string result;
  try {
    result = djl_attn::linear::causal_dot_product_plan_for(batch_heads, seqlen, dim_qk, dim_v,
                                                           element_size, sm_count, smem_limit);
  } catch (const std::exception& e) {
    result = std::string("error: ") + e.what();
  }
  return result.c_str();
}
