// Host side of the split-KV decode kernel (flash_decode_kernel.cuh): runs a planned split
// (plan_decode_split in flash_plan.h) with its float32 scratch and the combine pass.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cassert>
#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_decode_kernel.cuh"

// The instantiations live in flash_decode_{fp16,bf16}.cu, flash_decode_{fp16,bf16}_features.cu
// and flash_decode_{fp16,bf16}_alibi.cu.
#define DJL_FLASH_DECODE_EXTERN_ONE_(T, HEAD_DIM, PAGED, FEATURES, ALIBI)                        \
  extern template int                                                                           \
  djl_attn::flash::decode::decode_blocks_per_sm<T, HEAD_DIM, PAGED, FEATURES, ALIBI>(int);      \
  extern template void                                                                          \
  djl_attn::flash::decode::launch_decode<T, HEAD_DIM, PAGED, FEATURES, ALIBI>(                  \
      const djl_attn::flash::decode::DecodeArgs&, cudaStream_t);
#define DJL_FLASH_DECODE_EXTERN_FOR_(T, FEATURES, ALIBI)          \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, false, FEATURES, ALIBI)     \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, true, FEATURES, ALIBI)      \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, false, FEATURES, ALIBI)    \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, true, FEATURES, ALIBI)     \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, false, FEATURES, ALIBI)    \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, true, FEATURES, ALIBI)
DJL_FLASH_DECODE_EXTERN_FOR_(__half, false, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__half, true, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__half, true, true)
DJL_FLASH_DECODE_EXTERN_FOR_(__nv_bfloat16, false, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__nv_bfloat16, true, false)
DJL_FLASH_DECODE_EXTERN_FOR_(__nv_bfloat16, true, true)

namespace djl_attn::flash::decode {
namespace {

static_assert(DecodeTile<64>::kSmemBytes == smem_bytes(64) &&
                  DecodeTile<128>::kSmemBytes == smem_bytes(128) &&
                  DecodeTile<256>::kSmemBytes == smem_bytes(256) &&
                  DecodeTile<64>::kBlockN == kBlockN && DecodeTile<128>::kBlockN == kBlockN &&
                  DecodeTile<256>::kBlockN == kBlockN,
              "the plan's tile facts (flash_shapes.h) are the kernel's");

template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
void run_typed(const FlashParams& params, bool folded, const paged::PagedKv* paged,
               const KeySplit& split, cudaStream_t stream, int device) {
  DecodeArgs args{};
  args.params = params;
  args.rows_share_position = folded;
  const FlashParams& p = args.params;
  if constexpr (kPaged) {
    args.block_tables = paged->block_tables;
    args.table_stride = paged->table_stride;
    int shift = 0;
    while ((int64_t{1} << shift) < paged->block_size) ++shift;
    args.block_shift = shift;
  }
  // The shared-memory opt-in, once per device.
  decode_blocks_per_sm<T, kHeadDim, kPaged, kFeatures, kAlibi>(device);
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
  launch_decode<T, kHeadDim, kPaged, kFeatures, kAlibi>(args, stream);
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

// Calls visit.template operator()<T, kHeadDim, kPaged, kFeatures, kAlibi>() for the
// instantiation `kernel` names (ALiBi: the features instantiation with kAlibi). Its dtype and
// head dim are enumerations of the compiled ones (flash_plan.h), every one handled here.
template <typename Visit>
int visit_kernel(const DecodeKernel& kernel, Visit&& visit) {
  auto with_type = [&](auto type_tag) {
    using T = decltype(type_tag);
    auto with_flags = [&](auto paged_tag, auto features_tag, auto alibi_tag) {
      constexpr bool kPaged = decltype(paged_tag)::value;
      constexpr bool kFeatures = decltype(features_tag)::value;
      constexpr bool kAlibi = decltype(alibi_tag)::value;
      switch (kernel.head_dim) {  // every DecodeHeadDim
        case DecodeHeadDim::k64:
          return visit.template operator()<T, 64, kPaged, kFeatures, kAlibi>();
        case DecodeHeadDim::k128:
          return visit.template operator()<T, 128, kPaged, kFeatures, kAlibi>();
        case DecodeHeadDim::k256:
          break;
      }
      return visit.template operator()<T, 256, kPaged, kFeatures, kAlibi>();
    };
    auto with_paged = [&](auto paged_tag) {
      if (kernel.alibi) return with_flags(paged_tag, std::true_type{}, std::true_type{});
      return kernel.features ? with_flags(paged_tag, std::true_type{}, std::false_type{})
                             : with_flags(paged_tag, std::false_type{}, std::false_type{});
    };
    return kernel.paged ? with_paged(std::true_type{}) : with_paged(std::false_type{});
  };
  return kernel.dtype == DecodeType::kFloat16 ? with_type(__half{}) : with_type(__nv_bfloat16{});
}

// The occupancy query of one instantiation, for visit_kernel.
struct Occupancy {
  int device;
  template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
  int operator()() const {
    return decode_blocks_per_sm<T, kHeadDim, kPaged, kFeatures, kAlibi>(device);
  }
};

// The launch of one instantiation, for visit_kernel.
struct Launch {
  const FlashParams& p;
  bool folded;
  const paged::PagedKv* paged;
  const KeySplit& split;
  cudaStream_t stream;
  int device;
  template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
  int operator()() const {
    run_typed<T, kHeadDim, kPaged, kFeatures, kAlibi>(p, folded, paged, split, stream, device);
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

void run(const FlashParams& p, bool folded, const paged::PagedKv* paged,
         const DecodeKernel& kernel, const KeySplit& split, cudaStream_t stream, int device) {
  // What the plans guarantee (decode_runs_on, folds_query_groups and the decode rules of
  // plan_flash; flash_runs of plan_paged_attention, whose block sizes static_assert the table
  // lookups' rule), held by tests/test_plans_{flash,paged}.py: asserted in debug builds only.
  assert(p.seqlen_q >= 1 && p.seqlen_q <= kMaxRows);
  assert(p.cu_seqlens_q == nullptr && p.q_bias == nullptr && p.k_bias == nullptr &&
         p.v_bias == nullptr);
  assert((paged != nullptr) == kernel.paged);
  assert(has_flash_features(p) == kernel.features &&
         (p.alibi_slopes != nullptr) == kernel.alibi);
  assert(paged == nullptr ||
         (paged->block_size >= 8 && (paged->block_size & (paged->block_size - 1)) == 0));
  if (p.batch == 0 || p.heads_q == 0) return;  // an empty grid launches nothing
  visit_kernel(kernel, Launch{p, folded, paged, split, stream, device});
}

}  // namespace djl_attn::flash::decode
