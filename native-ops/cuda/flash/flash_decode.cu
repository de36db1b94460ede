// Host side of the split-KV decode kernel (flash_decode_kernel.cuh): runs a planned split
// (plan_decode_split in flash_plan.h) with its float32 scratch and the combine pass.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_decode_kernel.cuh"

// The instantiations live in flash_decode_{fp16,bf16}.cu and flash_decode_{fp16,bf16}_features.cu.
#define DJL_FLASH_DECODE_EXTERN_ONE_(T, HEAD_DIM, PAGED, FEATURES)                               \
  extern template int                                                                            \
  djl_attn::flash::decode::decode_blocks_per_sm<T, HEAD_DIM, PAGED, FEATURES>(int);              \
  extern template void djl_attn::flash::decode::launch_decode<T, HEAD_DIM, PAGED, FEATURES>(     \
      const djl_attn::flash::decode::DecodeArgs&, cudaStream_t);
#define DJL_FLASH_DECODE_EXTERN_FOR_(T, FEATURES)          \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, false, FEATURES)     \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, true, FEATURES)      \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, false, FEATURES)    \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, true, FEATURES)     \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, false, FEATURES)    \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, true, FEATURES)
DJL_FLASH_DECODE_EXTERN_FOR_(__half, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__half, true)
DJL_FLASH_DECODE_EXTERN_FOR_(__nv_bfloat16, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__nv_bfloat16, true)

namespace djl_attn::flash::decode {
namespace {

static_assert(DecodeTile<64>::kSmemBytes == smem_bytes(64) &&
                  DecodeTile<128>::kSmemBytes == smem_bytes(128) &&
                  DecodeTile<256>::kSmemBytes == smem_bytes(256) &&
                  DecodeTile<64>::kBlockN == kBlockN && DecodeTile<128>::kBlockN == kBlockN &&
                  DecodeTile<256>::kBlockN == kBlockN,
              "the plan's tile facts (flash_shapes.h) are the kernel's");

template <typename T, int kHeadDim, bool kPaged, bool kFeatures>
void run_typed(const FlashParams& params, bool folded, const PagedRows* paged,
               const KeySplit& split, cudaStream_t stream, int device) {
  DecodeArgs args{};
  args.params = params;
  args.rows_share_position = folded;
  const FlashParams& p = args.params;
  if constexpr (kPaged) {
    args.block_tables = paged->block_tables;
    args.table_stride = paged->table_stride;
    int shift = 0;
    while ((1 << shift) < paged->block_size) ++shift;
    args.block_shift = shift;
  }
  // The shared-memory opt-in, once per device.
  decode_blocks_per_sm<T, kHeadDim, kPaged, kFeatures>(device);
  args.n_blocks_per_split = split.n_blocks_per_split;
  args.num_splits = split.num_splits;
  cuda::Scratch o_accum, lse_accum;  // freed on return (cuda/common/scratch.h)
  if (split.num_splits > 1) {
    // Stream order makes the early free safe: the allocator hands the memory to later work on
    // this stream only, which the combine pass (a programmatic dependent that waits for this
    // kernel first thing, dependent_launch.cuh) keeps after both kernels.
    args.accum_rows = split.accum_rows;
    const size_t rows = static_cast<size_t>(split.num_splits) * p.heads_q * args.accum_rows;
    o_accum = cuda::Scratch(rows * p.head_dim * sizeof(float), device);
    lse_accum = cuda::Scratch(rows * sizeof(float), device);
    args.o_accum = o_accum.data_as<float>();
    args.lse_accum = lse_accum.data_as<float>();
  }
  launch_decode<T, kHeadDim, kPaged, kFeatures>(args, stream);
  if (split.num_splits > 1) {
    fwd::FwdArgs combine{};
    combine.params = p;
    combine.m_blocks = 1;
    combine.num_splits = split.num_splits;
    combine.n_blocks_per_split = args.n_blocks_per_split;
    combine.o_accum = args.o_accum;
    combine.lse_accum = args.lse_accum;
    combine.accum_rows = args.accum_rows;
    launch_flash_combine(combine, stream, device);
  }
}

// Calls visit.template operator()<T, kHeadDim, kPaged, kFeatures>() for the instantiation
// `kernel` names.
template <typename Visit>
auto visit_kernel(const DecodeKernel& kernel, Visit&& visit) {
  auto with_type = [&](auto type_tag) {
    using T = decltype(type_tag);
    auto with_flags = [&](auto paged_tag, auto features_tag) {
      constexpr bool kPaged = decltype(paged_tag)::value;
      constexpr bool kFeatures = decltype(features_tag)::value;
      switch (kernel.head_dim) {
        case 64: return visit.template operator()<T, 64, kPaged, kFeatures>();
        case 128: return visit.template operator()<T, 128, kPaged, kFeatures>();
        case 256: return visit.template operator()<T, 256, kPaged, kFeatures>();
        default: fail_native("flash decode: no kernel for head dim ", kernel.head_dim);
      }
    };
    auto with_paged = [&](auto paged_tag) {
      return kernel.features ? with_flags(paged_tag, std::true_type{})
                             : with_flags(paged_tag, std::false_type{});
    };
    return kernel.paged ? with_paged(std::true_type{}) : with_paged(std::false_type{});
  };
  switch (kernel.dtype) {
    case ElementType::kFloat16: return with_type(__half{});
    case ElementType::kBFloat16: return with_type(__nv_bfloat16{});
    default: fail_native("flash decode: unsupported element type ", static_cast<int>(kernel.dtype));
  }
}

// The occupancy query of one instantiation, for visit_kernel.
struct Occupancy {
  int device;
  template <typename T, int kHeadDim, bool kPaged, bool kFeatures>
  int operator()() const {
    return decode_blocks_per_sm<T, kHeadDim, kPaged, kFeatures>(device);
  }
};

// The launch of one instantiation, for visit_kernel.
struct Launch {
  const FlashParams& p;
  bool folded;
  const PagedRows* paged;
  const KeySplit& split;
  cudaStream_t stream;
  int device;
  template <typename T, int kHeadDim, bool kPaged, bool kFeatures>
  int operator()() const {
    run_typed<T, kHeadDim, kPaged, kFeatures>(p, folded, paged, split, stream, device);
    return 0;
  }
};

}  // namespace

bool runs_on(int64_t head_dim, int device) {
  return decode_runs_on(head_dim, cuda::device_facts(device));
}

int blocks_per_sm(const DecodeKernel& kernel, int device) {
  return visit_kernel(kernel, Occupancy{device});
}

void run(const FlashParams& p, bool folded, const PagedRows* paged, const DecodeKernel& kernel,
         const KeySplit& split, cudaStream_t stream, int device) {
  // The plans guarantee these; a failure here is a bug in one of them.
  if (p.seqlen_q < 1 || p.seqlen_q > kMaxRows) {
    fail_native("flash decode: expected 1 to ", kMaxRows, " query rows per block, got ",
                p.seqlen_q);
  }
  if (p.cu_seqlens_q != nullptr || p.q_bias != nullptr || p.k_bias != nullptr ||
      p.v_bias != nullptr) {
    fail_native("flash decode: varlen batches and q/k/v bias are not supported");
  }
  if ((paged != nullptr) != kernel.paged) {
    fail_native("flash decode: the kernel's row policy does not match the rows given");
  }
  if (p.alibi_slopes != nullptr || has_flash_features(p) != kernel.features) {
    fail_native("flash decode: the kernel's features do not match the call's (no ALiBi; the ",
                "window and soft-cap in the features instantiation only)");
  }
  // A warp's 16 key rows may span at most two cache blocks (the table lookups assume it).
  if (paged != nullptr &&
      (paged->block_size < 8 || (paged->block_size & (paged->block_size - 1)) != 0)) {
    fail_native("flash decode: block size must be a power of two >= 8, got ", paged->block_size);
  }
  if (p.batch == 0 || p.heads_q == 0) return;  // an empty grid launches nothing
  visit_kernel(kernel, Launch{p, folded, paged, split, stream, device});
}

void run_folded(const FlashParams& p, const PagedRows* paged, cudaStream_t stream, int device) {
  if (p.batch == 0 || p.heads_q == 0) return;  // an empty grid launches nothing
  const DecodeKernel kernel = decode_kernel(p, paged != nullptr);
  const KeySplit split = plan_decode_split(p.batch, p.heads_q, p.seqlen_q,
                                           decode_walked_keys(p, /*folded=*/true), p.head_dim,
                                           blocks_per_sm(kernel, device),
                                           cuda::device_facts(device).sm_count);
  run(p, /*folded=*/true, paged, kernel, split, stream, device);
}

}  // namespace djl_attn::flash::decode
