// sample_tokens on CUDA: one thread block per row, the rules of src/sampling/sampling_rules.h.
//
//   pass 1     the row's first maximum (torch.argmax's order) and largest non-NaN logit; greedy
//              rows stop here. A kernel of its own, kSegment logits per block, so that a small
//              batch reads its rows with many SMs (one block per row took 26-37 us for greedy
//              ids at a 128k vocabulary: one SM's bandwidth); the row's block reduces the
//              segments. With top-k, the row's block repeats it to count the logits' order keys
//              by their top 11 bits: the first digit of the k-th largest key's radix select
//   top-k      2 more radix passes (digits of 11 and 10 bits; count histograms in shared memory)
//   total      the kept tokens' fixed-point mass (64-bit integers: any order, same sum); with
//              top-p, the same pass adds each weight to its key's top-11-bit bin: the first digit
//              of the nucleus boundary's radix select
//   top-p      2 more radix passes over the keys with mass histograms find the boundary key: the
//              mass of larger keys is below ceil(p * total), with it at least that. Its tokens
//              (equal logits, equal weights) are kept lowest id first, as many as still needed
//   draw       tiles of 8 Ki logits in id order, one block scan of (mass, boundary tokens) each,
//              until the running kept mass passes floor(u * kept total); usually before the end
//
// Passes over the row: greedy 1; temperature only 2.5 on average (the draw stops halfway); top-k
// or top-p 4.5; both 6.5. Every sum is an integer sum, every selection exact, and the weights
// are computed with correctly rounded operations in a fixed order: the ids are bit-reproducible
// run to run and equal the CPU kernel's. Each pass re-reads the row from L2: Llama-3's 128,256
// float32 logits at batch 64 are 33 MB, within the H100's 50 MB L2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/common/convert.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/sampling/sample_tokens_cuda.h"
#include "sampling/sampling_rules.h"

namespace djl_attn::cuda {
namespace {

using sampling::SampleTokensParams;
using u64 = unsigned long long;

// 512 threads, each with four loads in flight (for_each_logit): 2048 loads per SM while a row is
// read. At 1024 threads the kernel was held to 64 registers and spilled 800 bytes per thread
// (ptxas, sm_90); at 512 it takes 115 and spills nothing.
constexpr int kThreads = 512;
// Loads each thread issues before using the first.
constexpr int kUnroll = 4;
// Radix digits over a 32-bit key: bits [21, 32), [10, 21), [0, 10); 2048 64-bit bins (16 KiB).
constexpr int kTopShift = 21;
constexpr int kBins = 1 << 11;
// Logits per thread per tile of the draw: 8 Ki per tile, 16 tiles at V = 128,256.
constexpr int kItems = 16;
// Logits per block of pass 1's own kernel: 16 segments at V = 128,256.
constexpr int kSegment = 8192;

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

// The draw's running sums: the kept mass of tokens above the boundary key and the number of
// boundary tokens.
struct Running {
  u64 mass;
  u64 ties;
};

struct RunningSum {
  __device__ Running operator()(const Running& a, const Running& b) const {
    return {a.mass + b.mass, a.ties + b.ties};
  }
};

struct Shared {
  union {
    typename cub::BlockReduce<Best, kThreads>::TempStorage best;
    typename cub::BlockReduce<float, kThreads>::TempStorage max;
    typename cub::BlockReduce<u64, kThreads>::TempStorage sum;
    typename cub::BlockScan<Running, kThreads>::TempStorage scan;
  } cub;
  u64 bins[kBins];
  int argmax;
  float max;
  u64 value;  // a block-wide result, broadcast
  uint32_t digit;
  u64 need;
};

// The digit bits of radix pass `pass` (0, 1, 2).
__device__ __forceinline__ int digit_shift(int pass) {
  return pass == 0 ? kTopShift : pass == 1 ? 10 : 0;
}
__device__ __forceinline__ int digit_bits(int pass) { return pass == 2 ? 10 : 11; }

// The key's float (order_key's inverse; the key of a weighed logit is never NaN's 0).
__device__ float key_float(uint32_t key) {
  return sampling::bits_float((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

// Calls fn(i, logit i) for every logit of the row: thread t takes i = t + j * kThreads, issuing
// kUnroll loads before it uses the first.
template <typename Load, typename Fn>
__device__ __forceinline__ void for_each_logit(int vocab, Load load, Fn fn) {
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < vocab; i += kUnroll * kThreads) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = load(i + u * kThreads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fn(i + u * kThreads, x[u]);
  }
  for (; i < vocab; i += kThreads) fn(i, load(i));
}

// Adds `w` to bin `bin` (negative: nothing) for every active lane of the warp with one
// shared-memory atomic per distinct bin: logits crowd into a few bins (their top key bits), and
// same-address atomics of one warp serialise. Lanes with the same bin sum their weights first, in
// two 32-bit reductions of 20-bit halves (exact: 32 weights <= 2^40 give sums < 2^25 per half).
__device__ __forceinline__ void add_to_bin(Shared& sh, int bin, u64 w) {
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, bin);
  const unsigned lo = __reduce_add_sync(peers, static_cast<unsigned>(w & 0xFFFFFu));
  const unsigned hi = __reduce_add_sync(peers, static_cast<unsigned>(w >> 20));
  if (bin >= 0 && static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1) {
    atomicAdd(&sh.bins[bin], (u64{hi} << 20) + lo);
  }
}

__device__ void clear_bins(Shared& sh) {
  for (int j = threadIdx.x; j < kBins; j += kThreads) sh.bins[j] = 0;
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
// logit (0: not counted). The bins already hold the first digit's histogram (made by a pass
// that also did other work). Returns K; `*left` is `need` less the weight of the keys above K.
template <typename Load, typename Weight>
__device__ uint32_t radix_select(Shared& sh, int vocab, u64 need, Load load, Weight weight,
                                 u64* left) {
  uint32_t prefix = 0;
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = digit_shift(pass), bits = digit_bits(pass), fixed = shift + bits;
    if (pass > 0) {
      clear_bins(sh);
      __syncthreads();
      for_each_logit(vocab, load, [&](int, float x) {
        const uint32_t key = sampling::order_key(x);
        const u64 w = (key >> fixed) == (prefix >> fixed) ? weight(x, key) : 0;
        add_to_bin(sh, w != 0 ? static_cast<int>((key >> shift) & ((1u << bits) - 1)) : -1, w);
      });
    }
    __syncthreads();
    if (threadIdx.x < 32) select_digit(sh, 1 << bits, need);
    __syncthreads();
    prefix |= sh.digit << shift;
    need = sh.need;
    __syncthreads();  // sh.digit and the bins are rewritten next
  }
  *left = need;
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

// Pass 1 over one segment of a row: its first maximum, its largest number, whether it has one.
struct Segment {
  Best best;
  float max;
  int any_number;
};

// Grid (segments, B): block (s, b) scans logits [s * kSegment, (s + 1) * kSegment) of row b.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    segment_pass_kernel(SampleTokensParams p, Segment* segments) {
  __shared__ Shared sh;
  const int64_t b = blockIdx.y;
  const int first = blockIdx.x * kSegment;
  const int count = min(kSegment, static_cast<int>(p.vocab) - first);
  const T* row = static_cast<const T*>(p.logits) + b * p.vocab + first;
  Best best{0.0f, INT_MAX};
  float max = -INFINITY;
  int any_number = 0;
  for_each_logit(count, [row](int i) { return to_float(row[i]); }, [&](int i, float x) {
    best = BestOp()(best, Best{x, first + i});
    if (x == x) {
      max = fmaxf(max, x);
      any_number = 1;
    }
  });
  best = cub::BlockReduce<Best, kThreads>(sh.cub.best).Reduce(best, BestOp());
  __syncthreads();
  max = cub::BlockReduce<float, kThreads>(sh.cub.max).Reduce(max, MaxOp());
  any_number = __syncthreads_or(any_number);
  if (threadIdx.x == 0) segments[b * gridDim.x + blockIdx.x] = Segment{best, max, any_number};
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sample_tokens_kernel(SampleTokensParams p, const Segment* segments, int num_segments) {
  __shared__ Shared sh;
  const int64_t b = blockIdx.x;
  const int vocab = static_cast<int>(p.vocab);
  const T* row = static_cast<const T*>(p.logits) + b * p.vocab;
  const auto load = [row](int i) { return to_float(row[i]); };
  const float temperature = p.temperature[b];
  const bool greedy = sampling::is_greedy(temperature);
  const int64_t k = sampling::effective_top_k(p.top_k[b], vocab);
  const bool use_top_k = !greedy && k < vocab;
  if (use_top_k) {
    clear_bins(sh);
    __syncthreads();
  }

  // Pass 1, from the segments: the first maximum, the largest number. (The operations are
  // exact and order-free: the same result as one pass over the row.)
  Best best{0.0f, INT_MAX};
  float max = -INFINITY;
  int any_number = 0;
  for (int s = threadIdx.x; s < num_segments; s += kThreads) {
    const Segment& seg = segments[b * num_segments + s];
    best = BestOp()(best, seg.best);
    max = fmaxf(max, seg.max);
    any_number |= seg.any_number;
  }
  best = cub::BlockReduce<Best, kThreads>(sh.cub.best).Reduce(best, BestOp());
  __syncthreads();
  max = cub::BlockReduce<float, kThreads>(sh.cub.max).Reduce(max, MaxOp());
  if (threadIdx.x == 0) {
    sh.argmax = best.index;
    sh.max = max;
  }
  any_number = __syncthreads_or(any_number);
  // Top-k's first digit: the row once more.
  if (use_top_k && any_number) {
    for_each_logit(vocab, load, [&](int, float x) {
      add_to_bin(sh, static_cast<int>(sampling::order_key(x) >> kTopShift), 1);
    });
  }
  if (greedy || !any_number) {
    if (threadIdx.x == 0) p.ids[b] = sh.argmax;
    return;
  }
  const float row_max = sh.max;

  // Top-k: keep the keys >= the k-th largest.
  uint32_t threshold = 0;
  if (use_top_k) {
    u64 unused;
    threshold = radix_select(sh, vocab, static_cast<u64>(k), load,
                             [](float, uint32_t) { return u64{1}; }, &unused);
  }
  const auto weight = [threshold, row_max, temperature](float x, uint32_t key) -> u64 {
    return key >= threshold ? sampling::fixed_weight(x, row_max, temperature) : 0;
  };

  // The total, and top-p's first digit.
  const float top_p = p.top_p[b];
  const bool top_p_bins = sampling::applies_top_p(top_p);
  if (top_p_bins) {
    clear_bins(sh);
    __syncthreads();
  }
  u64 part = 0;
  for_each_logit(vocab, load, [&](int, float x) {
    const uint32_t key = sampling::order_key(x);
    const u64 w = weight(x, key);
    part += w;
    if (top_p_bins) add_to_bin(sh, w != 0 ? static_cast<int>(key >> kTopShift) : -1, w);
  });
  const u64 total = block_sum(sh, part);

  // Top-p: the boundary key, the mass above it, how many of its tokens are kept.
  const u64 need = sampling::nucleus_need(top_p, total);
  const bool nucleus = need < total;
  uint32_t boundary_key = 0;
  u64 boundary = 0, ties = 0, kept_total = total;
  if (nucleus) {
    u64 left;
    boundary_key = radix_select(sh, vocab, need, load, weight, &left);
    boundary = weight(key_float(boundary_key), boundary_key);
    ties = (left + boundary - 1) / boundary;
    kept_total = need - left + ties * boundary;
  }

  // The draw: the kept mass in id order until it passes the target. A token's kept weight: its
  // weight above the boundary key, the boundary's weight for the boundary key's first `ties`
  // tokens, nothing below.
  const u64 target = sampling::draw_target(sampling::uniform_bits(p.seeds[b], p.offsets[b]),
                                           kept_total);
  Running carry{0, 0};
  for (int base = 0; base < vocab; base += kThreads * kItems) {
    const int first = base + threadIdx.x * kItems;
    const int last = min(first + kItems, vocab);
    Running mine{0, 0};
    for (int i = first; i < last; ++i) {
      const float x = load(i);
      const uint32_t key = sampling::order_key(x);
      if (!nucleus || key > boundary_key) {
        mine.mass += weight(x, key);
      } else if (key == boundary_key) {
        ++mine.ties;
      }
    }
    Running before, tile;
    cub::BlockScan<Running, kThreads>(sh.cub.scan)
        .ExclusiveScan(mine, before, Running{0, 0}, RunningSum(), tile);
    before = RunningSum()(carry, before);
    const u64 start = before.mass + boundary * min(ties, before.ties);
    const u64 end = before.mass + mine.mass + boundary * min(ties, before.ties + mine.ties);
    int found = 0;
    if (target >= start && target < end) {
      u64 running = start;
      u64 rank = before.ties;
      for (int i = first; i < last; ++i) {
        const float x = load(i);
        const uint32_t key = sampling::order_key(x);
        if (!nucleus || key > boundary_key) {
          running += weight(x, key);
        } else if (key == boundary_key) {
          running += rank < ties ? boundary : 0;
          ++rank;
        }
        if (running > target) {
          p.ids[b] = i;
          found = 1;
          break;
        }
      }
    }
    carry = RunningSum()(carry, tile);
    if (__syncthreads_or(found)) return;
  }
  // Not reached: target < kept_total, so some tile holds it.
  if (threadIdx.x == 0) p.ids[b] = sh.argmax;
}

template <typename T>
void launch(const SampleTokensParams& p, cudaStream_t stream, int device) {
  const int segments = static_cast<int>((p.vocab + kSegment - 1) / kSegment);
  const Scratch scratch(static_cast<size_t>(p.batch * segments) * sizeof(Segment), device);
  Segment* partial = scratch.data_as<Segment>();
  segment_pass_kernel<T><<<dim3(segments, static_cast<unsigned>(p.batch)), kThreads, 0, stream>>>(
      p, partial);
  DJL_ATTN_CUDA_CHECK_LAUNCH("sample_tokens segment_pass_kernel");
  sample_tokens_kernel<T><<<static_cast<unsigned>(p.batch), kThreads, 0, stream>>>(p, partial,
                                                                                  segments);
  DJL_ATTN_CUDA_CHECK_LAUNCH("sample_tokens_kernel");
}

}  // namespace

void run_sample_tokens_cuda(const SampleTokensParams& p) {
  if (p.batch == 0) return;
  const int device = device_of(p.logits);
  DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return launch<float>(p, stream, device);
    case ElementType::kFloat16: return launch<__half>(p, stream, device);
    case ElementType::kBFloat16: return launch<__nv_bfloat16>(p, stream, device);
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
