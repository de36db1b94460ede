// remove_padding / restore_padding on CUDA: row copies between a right-padded [B, S, C] batch
// and packed [total, C] tokens, one warp per row, in the widest unit (16, 8, 4 or 2 bytes) that
// the row size and the base pointers allow. The values are never looked at, so the kernels are
// per unit size, not per dtype.

#include <cstdint>

#include "cuda/bert/bert_cuda.cuh"
#include "cuda/bert/bert_plan.h"
#include "cuda/bert/bert_vector.cuh"
#include "cuda/common/cuda_check.h"

namespace djl_attn::bert {
namespace {

constexpr int kWarpsPerBlock = kPaddingWarps;

// The batch row of packed token t: the last b with cu_seqlens[b] <= t (empty rows share their
// start with the next row, so the last one is the row that holds t).
__device__ __forceinline__ int64_t batch_of_token(const int32_t* cu_seqlens, int64_t batch,
                                                  int64_t t) {
  int64_t lo = 0, hi = batch;  // cu_seqlens[lo] <= t < cu_seqlens[hi]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (cu_seqlens[mid] <= t) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename U>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    remove_padding_kernel(PaddingParams p, int64_t row_units) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       t < p.total; t += step) {
    const int64_t b = batch_of_token(p.cu_seqlens, p.batch, t);
    const int64_t s = t - p.cu_seqlens[b];
    const U* src = reinterpret_cast<const U*>(
        static_cast<const char*>(p.padded) +
        (b * p.padded_batch_stride + s * p.padded_seq_stride) * p.element_size);
    U* dst = reinterpret_cast<U*>(static_cast<char*>(p.packed)) + t * row_units;
#pragma unroll 2
    for (int64_t u = lane; u < row_units; u += kWarpSize) dst[u] = src[u];
  }
}

template <typename U>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    restore_padding_kernel(PaddingParams p, int64_t row_units) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t rows = p.batch * p.seqlen;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       row < rows; row += step) {
    const int64_t b = row / p.seqlen, s = row % p.seqlen;
    const int64_t start = p.cu_seqlens[b];
    const int64_t len = p.cu_seqlens[b + 1] - start;
    U* dst = reinterpret_cast<U*>(
        static_cast<char*>(p.padded) +
        (b * p.padded_batch_stride + s * p.padded_seq_stride) * p.element_size);
    if (s < len) {
      const U* src = reinterpret_cast<const U*>(static_cast<const char*>(p.packed)) +
                     (start + s) * row_units;
      for (int64_t u = lane; u < row_units; u += kWarpSize) dst[u] = src[u];
    } else {
      // All-zero bits are +0.0 in float32, float16 and bfloat16 alike.
      for (int64_t u = lane; u < row_units; u += kWarpSize) dst[u] = U{};
    }
  }
}

template <template <typename> class Launch>
void dispatch_unit(const PaddingParams& p, int64_t rows, const char* name) {
  const PaddingPlan plan = plan_padding(p, rows);
  const int device = pointer_device(p.packed);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  const unsigned blocks = static_cast<unsigned>(plan.blocks);
  switch (plan.unit) {
    case PaddingUnit::k16: Launch<uint4>::run(p, plan.row_units, blocks, stream); break;
    case PaddingUnit::k8: Launch<uint2>::run(p, plan.row_units, blocks, stream); break;
    case PaddingUnit::k4: Launch<uint32_t>::run(p, plan.row_units, blocks, stream); break;
    case PaddingUnit::k2: Launch<uint16_t>::run(p, plan.row_units, blocks, stream); break;
  }
  DJL_ATTN_CUDA_CHECK_LAUNCH(name);
}

template <typename U>
struct LaunchRemove {
  static void run(const PaddingParams& p, int64_t row_units, unsigned blocks, cudaStream_t s) {
    remove_padding_kernel<U><<<blocks, kWarpsPerBlock * kWarpSize, 0, s>>>(p, row_units);
  }
};

template <typename U>
struct LaunchRestore {
  static void run(const PaddingParams& p, int64_t row_units, unsigned blocks, cudaStream_t s) {
    restore_padding_kernel<U><<<blocks, kWarpsPerBlock * kWarpSize, 0, s>>>(p, row_units);
  }
};

}  // namespace

void run_remove_padding_cuda(const PaddingParams& params) {
  dispatch_unit<LaunchRemove>(params, params.total, "remove_padding_kernel");
}

void run_restore_padding_cuda(const PaddingParams& params) {
  dispatch_unit<LaunchRestore>(params, params.batch * params.seqlen, "restore_padding_kernel");
}

void copy_from_host_cuda(void* dst, const void* src, size_t bytes) {
  const int device = pointer_device(dst);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::current_stream(device);
  // From pageable memory the call returns once `src` has been staged, so it may be freed.
  DJL_ATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

}  // namespace djl_attn::bert
