// The combine pass of split-KV attention (flash_combine.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/dependent_launch.cuh"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_dispatch.h"

namespace djl_attn::flash {
namespace {

constexpr int kCombineThreads = 128;
// Ranges per round: lane s of every warp holds the logsumexp of range r * 32 + s of round r.
constexpr int kRangesPerRound = 32;
constexpr int kRounds = kMaxCombineSplits / kRangesPerRound;
static_assert(kMaxCombineSplits % kRangesPerRound == 0, "whole rounds");
// Output columns per thread: head dims up to 256.
constexpr int kColumnsPerThread = 2;
// padded_head_dim(n) is 0 when no compiled head dim reaches n (flash_shapes.h).
static_assert(padded_head_dim(kColumnsPerThread * kCombineThreads + 1) == 0,
              "every head dim the flash kernels are compiled for fits the combine's columns");
static_assert(kMaxHeadDim <= kColumnsPerThread * kCombineThreads,
              "every head dim the bindings accept fits the combine's columns");

// Merges the partial results of the key ranges of each (head, row): with per-range logsumexps
// l_s and outputs O_s (each normalised by its own sum), the row's logsumexp is
// L = log(sum_s exp(l_s)) and its output sum_s exp(l_s - L) O_s. One block per row; thread d
// sums output columns d and d + 128 over the ranges.
//
// The pass is pure latency (a batch-1 decode merges 32 ranges of 32 rows: nothing to stream),
// so up to 32 ranges it waits on memory once: those ranges' partial outputs are requested
// before the logsumexps, the logsumexps are read by all warps at once (lane s reads range s,
// every warp reduces them in registers: no shared memory, no barrier), and only then do the
// weights meet the outputs (further rounds of 32 ranges load in the loop). The earlier form, one warp turning logsumexps into weights in three
// passes through shared memory and the others waiting at a barrier, took 4.4 us at batch 1 · 4k.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) flash_combine_kernel(const fwd::FwdArgs args) {
  // Launched as a dependent of the split kernel: nothing it wrote is read before this.
  cuda::wait_for_prerequisite_grid();
  // The decoder's out projection after it (skinny_gemm.cu) may start streaming its weights.
  cuda::allow_dependent_launch();
  const FlashParams& p = args.params;
  const int lane = threadIdx.x % 32;
  const int64_t idx = blockIdx.x;  // the launcher sizes the grid to heads_q * accum_rows
  const int64_t h = idx / args.accum_rows;
  const int64_t row = idx % args.accum_rows;  // b * Sq + i
  const int64_t b = row / p.seqlen_q;
  const int64_t i = row % p.seqlen_q;
  const int splits = args.num_splits;
  const int dim = static_cast<int>(p.head_dim);
  const int64_t split_stride = p.heads_q * args.accum_rows;
  const int64_t base = h * args.accum_rows + row;
  const float* const partial = args.o_accum + base * dim;
  const int64_t partial_stride = split_stride * dim;

  // Round 0's partial outputs, in flight while the logsumexps load.
  float first[kColumnsPerThread][kRangesPerRound];
#pragma unroll
  for (int c = 0; c < kColumnsPerThread; ++c) {
    const int d = threadIdx.x + c * kCombineThreads;
#pragma unroll
    for (int j = 0; j < kRangesPerRound; ++j) {
      first[c][j] = d < dim && j < splits ? partial[j * partial_stride + d] : 0.f;
    }
  }

  // The row's logsumexp: lane s holds ranges s, s + 32, ... (-inf past the last range).
  float lse[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int s = r * kRangesPerRound + lane;
    lse[r] = s < splits ? args.lse_accum[base + s * split_stride] : -INFINITY;
  }
  float max_lse = -INFINITY;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) max_lse = fmaxf(max_lse, lse[r]);
  for (int o = 16; o > 0; o /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, o));
  // No range saw a key (sum 0): every weight 0, output 0, logsumexp -inf. A NaN logsumexp (the
  // split kernels write -inf for an empty or NaN row sum, so only a broken contract) makes the
  // sum, the weights and the output NaN rather than a silent 0.
  const float shift = max_lse == -INFINITY ? 0.f : max_lse;
  float sum = 0.f;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) sum += expf(lse[r] - shift);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const bool empty = sum == 0.f;
  const float row_lse = empty ? -INFINITY : shift + logf(sum);
  // Lane s's weight of its range in each round.
  float weight[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) weight[r] = empty ? 0.f : expf(lse[r] - row_lse);

  float acc[kColumnsPerThread] = {};
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    if (r * kRangesPerRound >= splits) break;
#pragma unroll
    for (int j = 0; j < kRangesPerRound; ++j) {
      const int s = r * kRangesPerRound + j;
      const float w = __shfl_sync(0xffffffffu, weight[r], j);
#pragma unroll
      for (int c = 0; c < kColumnsPerThread; ++c) {
        const int d = threadIdx.x + c * kCombineThreads;
        const float o = r == 0 ? first[c][j]
                               : (d < dim && s < splits ? partial[s * partial_stride + d] : 0.f);
        // A range that saw no key holds o = 0 with weight 0 (its logsumexp is -inf); selecting
        // it out rather than multiplying keeps the sum NaN-free even if that contract slipped.
        acc[c] += w != 0.f ? w * o : 0.f;
      }
    }
  }

  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + i * p.out_seq_stride +
           h * p.out_head_stride;
#pragma unroll
  for (int c = 0; c < kColumnsPerThread; ++c) {
    const int d = threadIdx.x + c * kCombineThreads;
    if (d >= dim) continue;
    if constexpr (std::is_same_v<T, __half>) {
      out[d] = __float2half_rn(acc[c]);
    } else {
      out[d] = __float2bfloat16_rn(acc[c]);
    }
  }
  // The paged decode has no logsumexp output.
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[lse_offset(p, b, h) + i] = row_lse;
}

}  // namespace

void launch_flash_combine(const fwd::FwdArgs& args, cudaStream_t stream, int device) {
  const FlashParams& p = args.params;
  // The plans split only grids that leave part of one wave of the GPU idle, whose rows are
  // few (far below the grid limit), into at most kMaxKeySplits ranges (flash_plan.cpp); the
  // bindings hold D to kMaxHeadDim (static_assert above).
  const int64_t rows = p.heads_q * args.accum_rows;
  if (rows == 0) return;
  DJL_FLASH_DTYPE_SWITCH(tile_type(p.dtype), T, [&] {
    cuda::launch_after_prerequisite<flash_combine_kernel<T>>(
        "flash_combine_kernel", dim3(static_cast<unsigned>(rows)), dim3(kCombineThreads), 0,
        stream, device, args);
  });
}

}  // namespace djl_attn::flash
