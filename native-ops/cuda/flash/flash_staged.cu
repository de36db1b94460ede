// Staged copies for the tensor-core flash kernels (flash_staged.h): pad rows to a multiple of 8
// elements on the way in, drop the padding on the way out. Called by the launcher
// (flash_launch.cu) before and after the planned kernel; calls nothing back.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_dispatch.h"
#include "cuda/flash/flash_plan.h"
#include "cuda/flash/flash_staged.h"

namespace djl_attn::flash {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535LL * 16;  // grid-stride loops past this

// A [n0, n1, n2, dim] view with element strides (s0, s1, s2, 1).
struct RowView {
  int64_t n0, n1, n2;
  int64_t s0, s1, s2;
};

// Element offset of row `row` (row-major over n0, n1, n2) of a view.
__device__ __forceinline__ int64_t row_offset(const RowView& view, int64_t row) {
  const int64_t i2 = row % view.n2;
  const int64_t i1 = (row / view.n2) % view.n1;
  const int64_t i0 = row / (view.n2 * view.n1);
  return i0 * view.s0 + i1 * view.s1 + i2 * view.s2;
}

// dst[i0, i1, i2, c] (contiguous, rows of `padded`) = src[i0, i1, i2, c] for c < dim, else 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    pad_rows_kernel(const T* __restrict__ src, RowView view, int dim, int padded,
                    T* __restrict__ dst) {
  const int64_t total = view.n0 * view.n1 * view.n2 * padded;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = idx / padded;
    const int c = static_cast<int>(idx % padded);
    dst[idx] = c < dim ? src[row_offset(view, row) + c] : cuda::from_float<T>(0.f);
  }
}

// dst[i0, i1, i2, c] (the caller's view) = src[i0, i1, i2, c] (contiguous rows of `padded`).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    unpad_rows_kernel(const T* __restrict__ src, RowView view, int dim, int padded,
                      T* __restrict__ dst) {
  const int64_t total = view.n0 * view.n1 * view.n2 * dim;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = idx / dim;
    const int c = static_cast<int>(idx % dim);
    dst[row_offset(view, row) + c] = src[row * padded + c];
  }
}

unsigned blocks_for(int64_t elements) {
  const int64_t blocks = (elements + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace

StagedCopies stage_inputs(const FlashParams& p, cudaStream_t stream, int device) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int dim = static_cast<int>(p.head_dim);
  StagedCopies copies;
  copies.params = staged_layout(p);
  FlashParams& s = copies.params;
  const int padded = static_cast<int>(s.head_dim);
  // Batched: [B, S, H, D]; varlen: one [total, H, D] "batch" (batch strides are 0 there).
  const int64_t n0 = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q;
  const int64_t rows_k = varlen ? p.total_k : p.seqlen_k;
  const Device dev{DeviceType::kCuda, device};
  const DType dtype = p.dtype == ElementType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
  copies.q = Tensor::empty({n0, rows_q, p.heads_q, padded}, dtype, dev);
  copies.k = Tensor::empty({n0, rows_k, p.heads_kv, padded}, dtype, dev);
  copies.v = Tensor::empty({n0, rows_k, p.heads_kv, padded}, dtype, dev);
  copies.out = Tensor::empty({n0, rows_q, p.heads_q, padded}, dtype, dev);
  s.q = copies.q.data();
  s.k = copies.k.data();
  s.v = copies.v.data();
  s.out = copies.out.data();

  const RowView q_view{n0, rows_q, p.heads_q, p.q_batch_stride, p.q_seq_stride, p.q_head_stride};
  const RowView k_view{n0, rows_k, p.heads_kv, p.k_batch_stride, p.k_seq_stride, p.k_head_stride};
  const RowView v_view{n0, rows_k, p.heads_kv, p.v_batch_stride, p.v_seq_stride, p.v_head_stride};
  DJL_FLASH_DTYPE_SWITCH(tile_type(p.dtype), T, [&] {
    auto pad = [&](const void* src, const RowView& view, void* dst) {
      const int64_t elements = view.n0 * view.n1 * view.n2 * padded;
      if (elements == 0) return;
      pad_rows_kernel<T><<<blocks_for(elements), kThreads, 0, stream>>>(
          static_cast<const T*>(src), view, dim, padded, static_cast<T*>(dst));
      DJL_ATTN_CUDA_CHECK_LAUNCH("pad_rows_kernel");
    };
    pad(p.q, q_view, copies.q.data());
    pad(p.k, k_view, copies.k.data());
    pad(p.v, v_view, copies.v.data());
  });
  return copies;
}

void unstage_output(const StagedCopies& copies, const FlashParams& p, cudaStream_t stream) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int dim = static_cast<int>(p.head_dim);
  const int padded = static_cast<int>(copies.params.head_dim);
  const int64_t n0 = varlen ? 1 : p.batch;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q;
  const RowView out_view{n0, rows_q, p.heads_q, p.out_batch_stride, p.out_seq_stride,
                         p.out_head_stride};
  DJL_FLASH_DTYPE_SWITCH(tile_type(p.dtype), T, [&] {
    const int64_t elements = out_view.n0 * out_view.n1 * out_view.n2 * dim;
    if (elements == 0) return;
    unpad_rows_kernel<T><<<blocks_for(elements), kThreads, 0, stream>>>(
        static_cast<const T*>(copies.params.out), out_view, dim, padded, static_cast<T*>(p.out));
    DJL_ATTN_CUDA_CHECK_LAUNCH("unpad_rows_kernel");
  });
}

}  // namespace djl_attn::flash
