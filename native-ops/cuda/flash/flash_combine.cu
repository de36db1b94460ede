// The combine pass of split-KV attention (flash_combine.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_dispatch.h"

namespace djl_attn::flash {
namespace {

constexpr int kMaxSplits = kMaxCombineSplits;
constexpr int kCombineThreads = 128;

// Merges the partial results of the key ranges of each (head, row): with per-range logsumexps
// l_s and outputs O_s (each normalised by its own sum), the row's logsumexp is
// L = log(sum_s exp(l_s)) and its output sum_s exp(l_s - L) O_s. One block per row: the first
// warp turns the logsumexps into weights, then every thread sums one output column over the
// ranges. The ranges' loads are independent and unrolled, so a thread has several in flight:
// with one warp per row and a serial walk over the ranges, a batch-1 decode (32 rows, 32
// ranges) spent about 40 us here waiting on one load at a time.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) flash_combine_kernel(const fwd::FwdArgs args) {
  __shared__ float weights[kMaxSplits];
  __shared__ float row_lse;
  const FlashParams& p = args.params;
  const int lane = threadIdx.x % 32;
  const int64_t idx = blockIdx.x;  // the launcher sizes the grid to heads_q * accum_rows
  const int64_t h = idx / args.accum_rows;
  const int64_t row = idx % args.accum_rows;  // b * Sq + i
  const int64_t b = row / p.seqlen_q;
  const int64_t i = row % p.seqlen_q;
  const int splits = args.num_splits;
  const int64_t split_stride = p.heads_q * args.accum_rows;
  const int64_t base = h * args.accum_rows + row;

  if (threadIdx.x < 32) {
    float max_lse = -INFINITY;
    for (int s = lane; s < splits; s += 32) max_lse = fmaxf(max_lse, args.lse_accum[base + s * split_stride]);
    for (int o = 16; o > 0; o /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, o));
    float sum = 0.f;
    if (max_lse != -INFINITY) {
      for (int s = lane; s < splits; s += 32) sum += expf(args.lse_accum[base + s * split_stride] - max_lse);
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    // No range saw a key: output 0, logsumexp -inf.
    const float lse = sum > 0.f ? max_lse + logf(sum) : -INFINITY;
    for (int s = lane; s < splits; s += 32) {
      weights[s] = sum > 0.f ? expf(args.lse_accum[base + s * split_stride] - lse) : 0.f;
    }
    if (lane == 0) row_lse = lse;
  }
  __syncthreads();

  const int dim = static_cast<int>(p.head_dim);
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + i * p.out_seq_stride +
           h * p.out_head_stride;
  const float* partial = args.o_accum + base * dim;
  const int64_t partial_stride = split_stride * dim;
  for (int d = threadIdx.x; d < dim; d += kCombineThreads) {
    float acc = 0.f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) {
      const float w = weights[s];
      const float o = partial[s * partial_stride + d];
      // A range that saw no key holds o = 0 with weight 0 (its logsumexp is -inf); selecting it
      // out rather than multiplying keeps the sum NaN-free even if that contract ever slipped.
      acc += w != 0.f ? w * o : 0.f;
    }
    if constexpr (std::is_same_v<T, __half>) {
      out[d] = __float2half_rn(acc);
    } else {
      out[d] = __float2bfloat16_rn(acc);
    }
  }
  // The paged decode has no logsumexp output.
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[lse_offset(p, b, h) + i] = row_lse;
}

}  // namespace

void launch_flash_combine(const fwd::FwdArgs& args, cudaStream_t stream) {
  const FlashParams& p = args.params;
  const int64_t rows = p.heads_q * args.accum_rows;
  // Splits happen only on grids that leave the GPU idle, whose rows are few.
  if (rows > 0x7fffffffLL) {
    fail_native("flash_attention: ", rows, " rows to combine exceed the CUDA grid limit");
  }
  if (args.num_splits > kMaxSplits) {
    fail_native("flash_attention: ", args.num_splits, " key ranges exceed the combine kernel's ",
                kMaxSplits);
  }
  if (rows == 0) return;
  DJL_FLASH_DTYPE_SWITCH(p.dtype, T, [&] {
    flash_combine_kernel<T><<<static_cast<unsigned>(rows), kCombineThreads, 0, stream>>>(args);
  });
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_combine_kernel");
}

}  // namespace djl_attn::flash
