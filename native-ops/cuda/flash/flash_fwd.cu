// Chooses and launches the CUDA flash attention forward: the tensor-core kernel for
// float16/bfloat16 on sm_80+, split over the keys when the grid would not fill the GPU, and the
// simple kernel for the rest.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/flash/flash_dispatch.h"
#include "cuda/flash/flash_fwd.cuh"
#include "cuda/flash/flash_simple.cuh"

namespace djl_attn::flash {
namespace {

using cuda::multiprocessor_count;

// The most key ranges one query tile is split into; also bounds the combine kernel's weights.
constexpr int kMaxSplits = 128;
constexpr int kCombineWarps = 4;

// Merges the partial results of the key ranges of each (head, row): with per-range logsumexps
// l_s and outputs O_s (each normalised by its own sum), the row's logsumexp is
// L = log(sum_s exp(l_s)) and its output sum_s exp(l_s - L) O_s. One warp per row.
template <typename T>
__global__ void __launch_bounds__(kCombineWarps * 32) flash_combine_kernel(const fwd::FwdArgs args) {
  __shared__ float weights[kCombineWarps][kMaxSplits];
  const FlashParams& p = args.params;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kCombineWarps + warp;
  if (idx >= p.heads_q * args.accum_rows) return;  // whole warps leave: shuffles stay full
  const int64_t h = idx / args.accum_rows;
  const int64_t row = idx % args.accum_rows;  // b * Sq + i
  const int64_t b = row / p.seqlen_q;
  const int64_t i = row % p.seqlen_q;
  const int splits = args.num_splits;
  const int64_t split_stride = p.heads_q * args.accum_rows;
  const int64_t base = h * args.accum_rows + row;

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
    weights[warp][s] = sum > 0.f ? expf(args.lse_accum[base + s * split_stride] - lse) : 0.f;
  }
  __syncwarp();

  const int dim = static_cast<int>(p.head_dim);
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + i * p.out_seq_stride +
           h * p.out_head_stride;
  for (int d = lane; d < dim; d += 32) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float w = weights[warp][s];
      // Ranges with weight 0 may hold no keys at all; skipping them also skips their reads.
      if (w != 0.f) acc += w * args.o_accum[(base + s * split_stride) * dim + d];
    }
    if constexpr (std::is_same_v<T, __half>) {
      out[d] = __float2half_rn(acc);
    } else {
      out[d] = __float2bfloat16_rn(acc);
    }
  }
  if (lane == 0) p.lse[lse_offset(p, b, h) + i] = lse;
}

// FlashAttention's num_splits_heuristic_fwd: the fewest splits whose wave efficiency (how full
// the last wave of blocks is) is within 95% of the best over 1..max_splits. Counts that give
// the same tiles per split as one fewer split are skipped: they add blocks, not balance.
int choose_splits(int64_t blocks, int sms, int blocks_per_sm, int n_blocks, int max_splits) {
  const double slots = static_cast<double>(sms) * std::max(blocks_per_sm, 1);
  // A grid that already fills most of one wave gains nothing from splitting.
  if (blocks >= 0.8 * slots) return 1;
  max_splits = std::min({max_splits, n_blocks, kMaxSplits});
  if (max_splits <= 1) return 1;
  auto eligible = [&](int s) {
    return s == 1 || (n_blocks + s - 1) / s != (n_blocks + s - 2) / (s - 1);
  };
  std::vector<double> efficiency(max_splits + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const double waves = static_cast<double>(blocks) * s / slots;
    efficiency[s] = waves / std::ceil(waves);
    best = std::max(best, efficiency[s]);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[s] >= 0.95 * best) return s;
  }
  return 1;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The tensor-core kernel loads 16-byte chunks with cp.async: D % 8 == 0, 16-byte aligned bases
// and every stride a multiple of 8 elements (batch strides are 0 in varlen mode). Other inputs
// (odd head dims, odd views) take the simple kernel.
bool vectorizable(const FlashParams& p) {
  if (p.head_dim % 8 != 0) return false;
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out)}) {
    if (!aligned16(ptr)) return false;
  }
  for (int64_t stride : {p.q_batch_stride, p.q_seq_stride, p.q_head_stride, p.k_batch_stride,
                         p.k_seq_stride, p.k_head_stride, p.v_batch_stride, p.v_seq_stride,
                         p.v_head_stride, p.out_batch_stride, p.out_seq_stride,
                         p.out_head_stride}) {
    if (stride % 8 != 0) return false;
  }
  return true;
}

// Decoding with grouped heads (Sq = 1, Hq = g * Hkv): the g query heads that share one
// key/value head become g query rows of one head, so one block reads each key/value tile once
// for all of them instead of g blocks reading it each. The query, output and logsumexp
// strides describe the same memory; a single query row sees every valid key, so the causal
// flag has no effect and is dropped (it would otherwise shift the diagonal of the new rows).
FlashParams fold_query_groups(const FlashParams& p) {
  const int64_t group = p.heads_q / p.heads_kv;
  FlashParams f = p;
  f.seqlen_q = group;
  f.heads_q = p.heads_kv;
  f.q_seq_stride = p.q_head_stride;
  f.q_head_stride = p.q_head_stride * group;
  f.out_seq_stride = p.out_head_stride;
  f.out_head_stride = p.out_head_stride * group;
  // The default [B, Hq, 1] logsumexp layout (the caller checks it): row gi of head hk is
  // element b * Hq + hk * g + gi.
  f.lse_batch_stride = p.heads_q;
  f.lse_head_stride = group;
  f.causal = false;
  return f;
}

template <typename T, int kHeadDim, bool kBias, bool kSmallM>
void run_tensor_core(const FlashParams& params, cudaStream_t stream, int device) {
  const fwd::FwdShape shape = fwd::fwd_shape<T, kHeadDim, kBias, kSmallM>(device);
  fwd::FwdArgs args{};
  args.params = params;
  const FlashParams& p = args.params;
  args.m_blocks = static_cast<int>((p.seqlen_q + shape.block_m - 1) / shape.block_m);
  const int n_blocks = static_cast<int>((p.seqlen_k + shape.block_n - 1) / shape.block_n);
  const int64_t blocks = static_cast<int64_t>(args.m_blocks) * p.batch * p.heads_q;
  if (blocks > 0x7fffffffLL) {
    fail_invalid("flash_attention: B * Hq * ceil(Sq / ", shape.block_m, ") = ", blocks,
                 " exceeds the CUDA grid limit of 2^31 - 1 blocks");
  }
  // Varlen batches are not split: their rows have no fixed b * Sq + i slot in the scratch.
  args.num_splits = p.cu_seqlens_q != nullptr
                        ? 1
                        : choose_splits(blocks, multiprocessor_count(device), shape.blocks_per_sm,
                                        n_blocks, kMaxSplits);
  args.n_blocks_per_split = std::max(1, (n_blocks + args.num_splits - 1) / args.num_splits);
  Tensor o_accum, lse_accum;  // scratch from PyTorch's caching allocator, freed on return
  if (args.num_splits > 1) {
    // Stream order makes the early free safe: the allocator hands the block to later work on
    // this stream only.
    args.accum_rows = p.batch * p.seqlen_q;
    const Device dev{DeviceType::kCuda, device};
    o_accum = Tensor::empty({args.num_splits, p.heads_q, args.accum_rows, p.head_dim},
                            DType::kFloat32, dev);
    lse_accum = Tensor::empty({args.num_splits, p.heads_q, args.accum_rows}, DType::kFloat32, dev);
    args.o_accum = o_accum.data_as<float>();
    args.lse_accum = lse_accum.data_as<float>();
  }
  fwd::launch_fwd<T, kHeadDim, kBias, kSmallM>(args, stream);
  if (args.num_splits > 1) {
    const int64_t rows = p.heads_q * args.accum_rows;
    const int64_t combine_blocks = (rows + kCombineWarps - 1) / kCombineWarps;
    flash_combine_kernel<T><<<static_cast<unsigned>(combine_blocks), kCombineWarps * 32, 0,
                              stream>>>(args);
    DJL_ATTN_CUDA_CHECK_LAUNCH("flash_combine_kernel");
  }
}

struct DeviceFacts {
  int major = 0;
  int smem_optin = 0;
};

DeviceFacts device_facts(int device) {
  DeviceFacts facts;
  DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&facts.major, cudaDevAttrComputeCapabilityMajor, device));
  DJL_ATTN_CUDA_CHECK(
      cudaDeviceGetAttribute(&facts.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return facts;
}

}  // namespace

void run_flash_attention_cuda(const FlashParams& params, void* stream_ptr, int device) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const int padded = padded_head_dim(params.head_dim);
  bool tensor_cores = params.dtype != ElementType::kFloat32 && padded != 0 && vectorizable(params);
  if (tensor_cores) {
    // mma.sync with bfloat16 and cp.async need sm_80; every tile shape fits in 96 KiB.
    const DeviceFacts facts = device_facts(device);
    tensor_cores = facts.major >= 8 && facts.smem_optin >= 96 * 1024;
  }
  if (!tensor_cores) {
    run_flash_attention_simple_cuda(params, stream);
    return;
  }
  const bool fold = params.cu_seqlens_q == nullptr && params.seqlen_q == 1 &&
                    params.heads_q > params.heads_kv && params.q_bias == nullptr &&
                    params.lse_head_stride == 0;
  const FlashParams p = fold ? fold_query_groups(params) : params;
  const bool bias = p.q_bias != nullptr || p.k_bias != nullptr || p.v_bias != nullptr;
  // Varlen batches size their grid by the longest sequence, so that is what must fit.
  const bool small_m = p.seqlen_q <= 64;
  DJL_FLASH_DTYPE_SWITCH(p.dtype, T, [&] {
    DJL_FLASH_HEAD_DIM_SWITCH(padded, kHeadDim, [&] {
      DJL_FLASH_BOOL_SWITCH(bias, kBias, [&] {
        DJL_FLASH_BOOL_SWITCH(small_m, kSmallM, [&] {
          run_tensor_core<T, kHeadDim, kBias, kSmallM>(p, stream, device);
        });
      });
    });
  });
}

}  // namespace djl_attn::flash
