// Chooses and launches the CUDA flash attention forward: the tensor-core kernel for
// float16/bfloat16 on sm_80+, split over the keys when the grid would not fill the GPU, the
// Hopper kernel (cuda/flash/hopper: wgmma, TMA, warp specialisation) for the prefill shapes it
// covers on compute capability 9.0, and the simple kernel for the rest.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/options.h"
#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_cuda.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_dispatch.h"
#include "cuda/flash/flash_fwd.cuh"
#include "cuda/flash/flash_simple.cuh"
#include "cuda/flash/flash_staged.h"
#if defined(DJL_ATTN_HOPPER)
#include "cuda/flash/hopper/flash_hopper.h"
#endif

namespace djl_attn::flash {
namespace {

using cuda::multiprocessor_count;

// The most key ranges one query tile is split into; also bounds the combine kernel's weights.
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

template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg>
void run_tensor_core(const FlashParams& params, cudaStream_t stream, int device) {
  const fwd::FwdShape shape = fwd::fwd_shape<T, kHeadDim, kBias, kSmallM, kCfg>(device);
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
  fwd::launch_fwd<T, kHeadDim, kBias, kSmallM, kCfg>(args, stream);
  if (args.num_splits > 1) launch_flash_combine(args, stream);
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

// DJL_ATTN_FLASH_CONFIG: a kFwdConfigs tile configuration by name, for tuning runs; "default"
// is index 0, the original tiles. Unset ("auto"): kAutoConfig, the measured best per head dim
// (tuned_config). Read once at load (common/options.h; a name not in the table is reported there,
// once, so that a typo cannot pass for a measurement) and switched in-process through
// djl_attn_set_option.
constexpr int kAutoConfig = -1;

// The configurations this build compiled (all of kFwdConfigs in a DJL_ATTN_TUNING build; the
// default tiles and the two measured defaults otherwise), in kFwdConfigs order.
std::vector<std::string> config_choices() {
  std::vector<std::string> names{"auto"};
  for (int c = 0; c < fwd::kNumFwdConfigs; ++c) {
    if (fwd::config_compiled(c, 64) || fwd::config_compiled(c, 128)) {
      names.push_back(fwd::kFwdConfigs[c].name);
    }
  }
  return names;
}

Option kFlashConfig("DJL_ATTN_FLASH_CONFIG", config_choices(),
                    "a tile configuration of the sm_80 flash kernel (tuning runs)");

// The kFwdConfigs index of the switch's value, or kAutoConfig.
int requested_config() {
  if (kFlashConfig.index() == 0) return kAutoConfig;
  for (int c = 0; c < fwd::kNumFwdConfigs; ++c) {
    if (kFlashConfig.value() == fwd::kFwdConfigs[c].name) return c;
  }
  return kAutoConfig;
}

// What runs when no configuration is asked for. Measured on an H200 (docs/benchmarks.md, S = 2k
// and 8k, fp16/bf16, causal and not, in one run against SDPA's flash backend): at D = 128 the
// lazy-rescale, folded-scale, staged-output variant of the default tiles ran 1.057x the default
// (geomean; 0.97-1.08x SDPA flash against 0.94-1.03x), at D = 64 the same variant on 128x128
// tiles 1.040x (0.93-1.02x against 0.90-0.95x). Other head dims keep the default tiles.
int tuned_config(int padded_head_dim) {
  if (padded_head_dim == 64) return fwd::kTunedD64;
  if (padded_head_dim == 128) return fwd::kTunedD128;
  return 0;
}

// Dynamic shared memory of configuration `cfg` at `head_dim` (cfg != 0).
int config_smem_bytes(int cfg, int head_dim) {
  const fwd::FwdConfig& c = fwd::kFwdConfigs[cfg];
  return (c.block_m + 2 * c.stages * c.block_n) * head_dim * 2;
}

// Runs configuration kCfg where it is compiled for kHeadDim, else the default.
template <typename T, int kHeadDim, int kCfg>
void run_config(const FlashParams& p, cudaStream_t stream, int device) {
  if constexpr (fwd::config_compiled(kCfg, kHeadDim)) {
    run_tensor_core<T, kHeadDim, false, false, kCfg>(p, stream, device);
  } else {
    run_tensor_core<T, kHeadDim, false, false, 0>(p, stream, device);
  }
}

template <typename T, int kHeadDim>
void run_selected_config(int cfg, const FlashParams& p, cudaStream_t stream, int device) {
  static_assert(fwd::kNumFwdConfigs == 21, "one case per configuration");
  switch (cfg) {
    case 1: return run_config<T, kHeadDim, 1>(p, stream, device);
    case 2: return run_config<T, kHeadDim, 2>(p, stream, device);
    case 3: return run_config<T, kHeadDim, 3>(p, stream, device);
    case 4: return run_config<T, kHeadDim, 4>(p, stream, device);
    case 5: return run_config<T, kHeadDim, 5>(p, stream, device);
    case 6: return run_config<T, kHeadDim, 6>(p, stream, device);
    case 7: return run_config<T, kHeadDim, 7>(p, stream, device);
    case 8: return run_config<T, kHeadDim, 8>(p, stream, device);
    case 9: return run_config<T, kHeadDim, 9>(p, stream, device);
    case 10: return run_config<T, kHeadDim, 10>(p, stream, device);
    case 11: return run_config<T, kHeadDim, 11>(p, stream, device);
    case 12: return run_config<T, kHeadDim, 12>(p, stream, device);
    case 13: return run_config<T, kHeadDim, 13>(p, stream, device);
    case 14: return run_config<T, kHeadDim, 14>(p, stream, device);
    case 15: return run_config<T, kHeadDim, 15>(p, stream, device);
    case 16: return run_config<T, kHeadDim, 16>(p, stream, device);
    case 17: return run_config<T, kHeadDim, 17>(p, stream, device);
    case 18: return run_config<T, kHeadDim, 18>(p, stream, device);
    case 19: return run_config<T, kHeadDim, 19>(p, stream, device);
    case 20: return run_config<T, kHeadDim, 20>(p, stream, device);
    default: return run_config<T, kHeadDim, 0>(p, stream, device);
  }
}

// DJL_ATTN_FLASH_DECODE: "auto" (unset) runs problems of at most 16 query rows per (batch,
// head) after folding through the split-KV decode kernel where it applies; "on" does the same but
// fails, with the reason, where such a problem cannot take it (so that tests see a silent
// fallback); "off" keeps them on the tile kernel, for comparisons. Read once at load, like
// DJL_ATTN_FLASH_CONFIG.
enum class DecodeMode { kAuto, kOn, kOff };

Option kFlashDecode("DJL_ATTN_FLASH_DECODE", {"auto", "on", "off"},
                    "the flash decode kernel: auto, forced (tests), or off (comparisons)");

DecodeMode decode_mode() {
  if (kFlashDecode.is("on")) return DecodeMode::kOn;
  if (kFlashDecode.is("off")) return DecodeMode::kOff;
  return DecodeMode::kAuto;
}

// Why the decode kernel cannot take a problem of at most 16 rows, or null when it can.
const char* decode_refusal(const FlashParams& p, bool tensor_cores, int device) {
  if (!tensor_cores) {
    return "float32, a head dim that is not a multiple of 8, unaligned rows or a GPU before sm_80";
  }
  if (p.q_bias != nullptr || p.k_bias != nullptr || p.v_bias != nullptr) return "q/k/v bias";
  if (p.cu_seqlens_q != nullptr) return "a varlen batch";
  if (!decode::runs_on(p.head_dim, device)) {
    return "a head dim other than 64, 128 or 256, or too little shared memory";
  }
  return nullptr;
}

// DJL_ATTN_FLASH_HOPPER: "auto" (or unset/empty) runs the shapes the Hopper kernel covers
// through it on compute capability 9.0 (cuda/flash/hopper) where its grid fills the GPU; "on"
// takes it for every covered shape, small grids too (for tests); "off" keeps the sm_80 kernel,
// for comparisons. Read once at load, like DJL_ATTN_FLASH_CONFIG.
enum class HopperMode { kAuto, kOn, kOff };

Option kFlashHopper("DJL_ATTN_FLASH_HOPPER", {"auto", "on", "off"},
                    "the Hopper flash kernel: auto, forced (tests), or off (comparisons)");

HopperMode hopper_mode() {
  if (kFlashHopper.is("on")) return HopperMode::kOn;
  if (kFlashHopper.is("off")) return HopperMode::kOff;
  return HopperMode::kAuto;
}

// Whether the Hopper kernel took this call. It does not split over the keys, so under "auto" a
// grid of 128-row tiles that leaves SMs idle stays on the sm_80 kernel, whose split-KV fills
// them; problems of at most 64 query rows keep the sm_80 kernel's 64-row tiles.
bool run_hopper(const FlashParams& p, HopperMode mode, cudaStream_t stream, int device) {
#if defined(DJL_ATTN_HOPPER)
  if (mode == HopperMode::kOff || p.seqlen_q <= 64 || p.cu_seqlens_q != nullptr) return false;
  const int64_t tiles = (p.seqlen_q + 127) / 128 * p.batch * p.heads_q;
  if (mode == HopperMode::kAuto && tiles < 0.8 * multiprocessor_count(device)) return false;
  return hopper::run(p, stream, device);
#else
  (void)p, (void)mode, (void)stream, (void)device;
  return false;
#endif
}

}  // namespace

void launch_flash_combine(const fwd::FwdArgs& args, cudaStream_t stream) {
  const FlashParams& p = args.params;
  const int64_t rows = p.heads_q * args.accum_rows;
  if (rows > 0x7fffffffLL) {
    fail_invalid("flash_attention: ", rows, " rows to combine exceed the CUDA grid limit");
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

void run_flash_attention_cuda(const FlashParams& params, void* stream_ptr, int device) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const int padded = padded_head_dim(params.head_dim);
  DeviceFacts facts;
  bool capable = false;  // a GPU the tensor-core kernels run on, for a dtype they take
  if (params.dtype != ElementType::kFloat32) {
    // mma.sync with bfloat16 and cp.async need sm_80; every default tile shape fits in 96 KiB.
    facts = device_facts(device);
    capable = facts.major >= 8 && facts.smem_optin >= 96 * 1024;
  }
  const bool tensor_cores = capable && padded != 0 && vectorizable(params);
  // Head dims that are not a multiple of 8 and unaligned views run on staged, padded copies
  // (flash_staged.h) rather than on the simple kernel; the staged call comes back here.
  const bool staged = !tensor_cores && capable && staging_applies(params);
  int cfg = requested_config();
  const DecodeMode decode_sel = decode_mode();
  const HopperMode hopper_sel = hopper_mode();
  if (decode_sel == DecodeMode::kOn && !staged) {  // a staged call is checked on its copies
    // The rows the decode kernel would see: the GQA fold below applies to single-row batches.
    const bool folds = params.cu_seqlens_q == nullptr && params.seqlen_q == 1 &&
                       params.q_bias == nullptr && params.lse_head_stride == 0;
    const int64_t rows = folds ? params.heads_q / params.heads_kv : params.seqlen_q;
    const char* refusal = rows <= decode::kMaxRows ? decode_refusal(params, tensor_cores, device)
                                                   : nullptr;
    if (refusal != nullptr) {
      fail_invalid("flash_attention: DJL_ATTN_FLASH_DECODE=on: the decode kernel does not take ",
                   refusal);
    }
  }
  if (staged) {
    run_staged(params, stream, device, [&](const FlashParams& copies) {
      if (!vectorizable(copies)) fail_native("flash_attention: staged copies are not vectorizable");
      run_flash_attention_cuda(copies, stream, device);
    });
    return;
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
  // Few query rows (decode, with the group folded): one m16 tile per block instead of a
  // 64-row tile, split over the keys to fill the GPU.
  if (decode_sel != DecodeMode::kOff && !bias && p.cu_seqlens_q == nullptr && p.seqlen_q >= 1 &&
      p.seqlen_q <= decode::kMaxRows && decode::runs_on(p.head_dim, device)) {
    decode::run(p, nullptr, stream, device);
    return;
  }
  // A tile configuration named in DJL_ATTN_FLASH_CONFIG is an sm_80-kernel measurement: "auto"
  // leaves it there.
  if (!bias && facts.major == 9 &&
      !(hopper_sel == HopperMode::kAuto && cfg != kAutoConfig) &&
      run_hopper(p, hopper_sel, stream, device)) {
    return;
  }
  if (cfg == kAutoConfig) cfg = tuned_config(padded);
  if (bias || small_m || !fwd::config_compiled(cfg, padded) ||
      (cfg != 0 && config_smem_bytes(cfg, padded) > facts.smem_optin) ||
      (fwd::kFwdConfigs[cfg].fused_scale && !(p.scale > 0.f))) {
    cfg = 0;
  }
  if (cfg != 0) {
    DJL_FLASH_DTYPE_SWITCH(p.dtype, T, [&] {
      if (padded == 64) {
        run_selected_config<T, 64>(cfg, p, stream, device);
      } else {
        run_selected_config<T, 128>(cfg, p, stream, device);
      }
    });
    return;
  }
  DJL_FLASH_DTYPE_SWITCH(p.dtype, T, [&] {
    DJL_FLASH_HEAD_DIM_SWITCH(padded, kHeadDim, [&] {
      DJL_FLASH_BOOL_SWITCH(bias, kBias, [&] {
        DJL_FLASH_BOOL_SWITCH(small_m, kSmallM, [&] {
          run_tensor_core<T, kHeadDim, kBias, kSmallM, 0>(p, stream, device);
        });
      });
    });
  });
}

}  // namespace djl_attn::flash
