// sample_tokens on CUDA: one thread block per row, the rules of src/sampling/sampling_rules.h.
//
//   pass 1           the row's first maximum (torch.argmax's order) and largest non-NaN logit;
//                    greedy rows stop here
//   top-k            radix select of the k-th largest logit key: 3 passes of 11/11/10-bit digits
//                    with count histograms in shared memory
//   total            the kept tokens' fixed-point mass (64-bit integers: any order, same sum)
//   top-p            radix select, over the logit keys again, of the key where the mass from the
//                    top reaches ceil(p * total) (3 passes, mass histograms; weights do not
//                    decrease with the logit, so this key's weight is the nucleus boundary),
//                    then the mass strictly above that weight (1 pass): the boundary's ties are
//                    kept lowest id first, as many as the mass still needs
//   draw             block prefix scans in id order, tile by tile, until the running kept mass
//                    passes floor(u * kept total); usually ends before the row does
//
// Every sum is an integer sum, every selection exact, and the weights are computed with
// correctly rounded operations in a fixed order: the ids are bit-reproducible run to run and
// equal the CPU kernel's. The row (at most 2^24 logits) is re-read from L2 by each pass: Llama-3's
// 128,256 fp32 logits at batch 64 are 33 MB, within the H100's 50 MB L2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/sampling/sample_tokens_cuda.h"
#include "sampling/sampling_rules.h"

namespace djl_attn::cuda {
namespace {

using sampling::SampleTokensParams;
using u64 = unsigned long long;

// 1024 threads: 32 warps of loads in flight per SM while a row is read, the most a block holds.
constexpr int kThreads = 1024;
// Radix digits of up to 11 bits: a 32-bit key in 3 passes, 2048 64-bit bins (16 KiB).
constexpr int kRadixBits = 11;
constexpr int kBins = 1 << kRadixBits;
// Logits per thread per tile of the draw's scan.
constexpr int kItems = 4;

// A candidate for the row's first maximum; index INT_MAX: none yet.
struct Best {
  float value;
  int index;
};

// torch.argmax's order: a NaN above every number, then the larger value, then the lower index.
struct BestOp {
  __device__ Best operator()(const Best& a, const Best& b) const {
    if (a.index == INT_MAX) return b;
    if (b.index == INT_MAX) return a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct Shared {
  union {
    typename cub::BlockReduce<Best, kThreads>::TempStorage best;
    typename cub::BlockReduce<float, kThreads>::TempStorage max;
    typename cub::BlockReduce<u64, kThreads>::TempStorage sum;
    typename cub::BlockScan<int, kThreads>::TempStorage scan_int;
    typename cub::BlockScan<u64, kThreads>::TempStorage scan_u64;
  } cub;
  u64 bins[kBins];
  int argmax;
  float max;
  u64 value;      // a block-wide result, broadcast
  uint32_t digit;
  u64 need;
};

// The key's float (order_key's inverse; the key of a selected, weighed logit is never NaN's 0).
__device__ float key_float(uint32_t key) {
  return sampling::bits_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// Warp 0: the digit whose bin holds the `need`-th unit of weight counted from the top, and the
// weight still needed inside it. Each lane sums 1/32 of the bins; lane suffix sums find the lane.
__device__ void select_digit(Shared& sh, int num_bins, u64 need) {
  const int lane = threadIdx.x;
  const int per = num_bins / 32;
  const int lo = lane * per;
  u64 sum = 0;
  for (int j = 0; j < per; ++j) sum += sh.bins[lo + j];
  u64 from_here = sum;  // the bins of this lane and every lane above it
  for (int offset = 1; offset < 32; offset <<= 1) {
    const u64 v = __shfl_down_sync(0xFFFFFFFFu, from_here, offset);
    if (lane + offset < 32) from_here += v;
  }
  const u64 above = from_here - sum;
  if (above < need && need <= from_here) {
    u64 acc = above;
    for (int j = per - 1; j >= 0; --j) {
      const u64 bin = sh.bins[lo + j];
      if (acc + bin >= need) {
        sh.digit = static_cast<uint32_t>(lo + j);
        sh.need = need - acc;
        break;
      }
      acc += bin;
    }
  }
}

// The largest key K such that the weight of the keys >= K reaches `need` (>= 1, at most the
// row's total weight): the need-th largest key when every weight is 1. `weight(x, key)` weighs a
// logit (0: not counted).
template <typename Load, typename Weight>
__device__ uint32_t radix_select(Shared& sh, int vocab, u64 need, Load load, Weight weight) {
  uint32_t prefix = 0;
#pragma unroll
  for (int pass = 0; pass < 3; ++pass) {
    // Digits of bits [21, 32), [10, 21), [0, 10).
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
    const int bits = pass == 2 ? 10 : kRadixBits, fixed = shift + bits;
    for (int j = threadIdx.x; j < kBins; j += kThreads) sh.bins[j] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = load(i);
      const uint32_t key = sampling::order_key(x);
      if (fixed < 32 && (key >> fixed) != (prefix >> fixed)) continue;
      const u64 w = weight(x, key);
      if (w != 0) atomicAdd(&sh.bins[(key >> shift) & ((1u << bits) - 1)], w);
    }
    __syncthreads();
    if (threadIdx.x < 32) select_digit(sh, 1 << bits, need);
    __syncthreads();
    prefix |= sh.digit << shift;
    need = sh.need;
  }
  return prefix;
}

// The block's sum of one u64 per thread, on every thread.
__device__ u64 block_sum(Shared& sh, u64 part) {
  const u64 sum = cub::BlockReduce<u64, kThreads>(sh.cub.sum).Sum(part);
  if (threadIdx.x == 0) sh.value = sum;
  __syncthreads();
  const u64 out = sh.value;
  __syncthreads();
  return out;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) sample_tokens_kernel(SampleTokensParams p) {
  __shared__ Shared sh;
  const int64_t b = blockIdx.x;
  const int vocab = static_cast<int>(p.vocab);
  const T* row = static_cast<const T*>(p.logits) + b * p.vocab;
  const auto load = [row](int i) { return to_float(row[i]); };

  // Pass 1: the first maximum and the largest number.
  Best best{0.0f, INT_MAX};
  float max = -INFINITY;
  int any_number = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = load(i);
    best = BestOp()(best, Best{x, i});
    if (x == x) {
      max = fmaxf(max, x);
      any_number = 1;
    }
  }
  best = cub::BlockReduce<Best, kThreads>(sh.cub.best).Reduce(best, BestOp());
  __syncthreads();
  max = cub::BlockReduce<float, kThreads>(sh.cub.max).Reduce(max, MaxOp());
  if (threadIdx.x == 0) {
    sh.argmax = best.index;
    sh.max = max;
  }
  any_number = __syncthreads_or(any_number);
  const float temperature = p.temperature[b];
  if (sampling::is_greedy(temperature) || !any_number) {
    if (threadIdx.x == 0) p.ids[b] = sh.argmax;
    return;
  }
  const float row_max = sh.max;

  // Top-k: keep the keys >= the k-th largest.
  const int64_t k = sampling::effective_top_k(p.top_k[b], vocab);
  uint32_t threshold = 0;
  if (k < vocab) {
    threshold = radix_select(sh, vocab, static_cast<u64>(k), load,
                             [](float, uint32_t) { return u64{1}; });
  }
  const auto weight = [threshold, row_max, temperature](float x, uint32_t key) -> u64 {
    return key >= threshold ? sampling::fixed_weight(x, row_max, temperature) : 0;
  };
  u64 part = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = load(i);
    part += weight(x, sampling::order_key(x));
  }
  const u64 total = block_sum(sh, part);

  // Top-p: the boundary weight, the mass above it, and how many of its ties are kept.
  const float top_p = p.top_p[b];
  const u64 need = sampling::nucleus_need(top_p, total);
  const bool nucleus = need < total;
  u64 boundary = 0, ties = 0, kept_total = total;
  if (nucleus) {
    const uint32_t key = radix_select(sh, vocab, need, load, weight);
    boundary = sampling::fixed_weight(key_float(key), row_max, temperature);
    part = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = load(i);
      const u64 w = weight(x, sampling::order_key(x));
      if (w > boundary) part += w;
    }
    const u64 above = block_sum(sh, part);
    ties = (need - above + boundary - 1) / boundary;
    kept_total = above + ties * boundary;
  }

  // The draw: scan the kept weights in id order until the running sum passes the target.
  const u64 target = sampling::draw_target(sampling::uniform_bits(p.seeds[b], p.offsets[b]),
                                           kept_total);
  u64 carry_mass = 0;
  int carry_ties = 0;
  for (int base = 0; base < vocab; base += kThreads * kItems) {
    const int first = base + threadIdx.x * kItems;
    u64 w[kItems];
    int my_ties = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      w[j] = 0;
      if (first + j < vocab) {
        const float x = load(first + j);
        w[j] = weight(x, sampling::order_key(x));
      }
      if (nucleus) {
        if (w[j] < boundary) w[j] = 0;
        if (w[j] == boundary && w[j] != 0) ++my_ties;
      }
    }
    int tie_rank, tile_ties;
    cub::BlockScan<int, kThreads>(sh.cub.scan_int).ExclusiveSum(my_ties, tie_rank, tile_ties);
    __syncthreads();
    tie_rank += carry_ties;
    u64 mine = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (nucleus && w[j] == boundary && w[j] != 0) {
        if (static_cast<u64>(tie_rank) >= ties) w[j] = 0;
        ++tie_rank;
      }
      mine += w[j];
    }
    u64 start, tile_mass;
    cub::BlockScan<u64, kThreads>(sh.cub.scan_u64).ExclusiveSum(mine, start, tile_mass);
    start += carry_mass;
    int found = 0;
    if (target >= start && target - start < mine) {
      u64 running = start;
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        running += w[j];
        if (!found && running > target) {
          p.ids[b] = first + j;
          found = 1;
        }
      }
    }
    carry_mass += tile_mass;
    carry_ties += tile_ties;
    if (__syncthreads_or(found)) return;
  }
  // Not reached: target < kept_total, so some tile holds it.
  if (threadIdx.x == 0) p.ids[b] = sh.argmax;
}

template <typename T>
void launch(const SampleTokensParams& p, cudaStream_t stream) {
  sample_tokens_kernel<T><<<static_cast<unsigned>(p.batch), kThreads, 0, stream>>>(p);
  DJL_ATTN_CUDA_CHECK_LAUNCH("sample_tokens_kernel");
}

}  // namespace

void run_sample_tokens_cuda(const SampleTokensParams& p) {
  if (p.batch == 0) return;
  const int device = device_of(p.logits);
  DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return launch<float>(p, stream);
    case ElementType::kFloat16: return launch<__half>(p, stream);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(p, stream);
  }
}

bool stream_is_capturing(const void* ptr) {
  const int device = device_of(ptr);
  DeviceGuard guard(device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  DJL_ATTN_CUDA_CHECK(cudaStreamIsCapturing(current_stream(device), &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace djl_attn::cuda
