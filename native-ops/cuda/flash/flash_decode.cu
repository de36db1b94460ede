// Host side of the split-KV decode kernel (flash_decode_kernel.cuh): how many key ranges, the
// float32 scratch for their partial results, and the combine pass.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_combine.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_decode_kernel.cuh"

// The instantiations live in flash_decode_fp16.cu and flash_decode_bf16.cu.
#define DJL_FLASH_DECODE_EXTERN_ONE_(T, HEAD_DIM, PAGED)                                        \
  extern template int djl_attn::flash::decode::decode_blocks_per_sm<T, HEAD_DIM, PAGED>(int);   \
  extern template void djl_attn::flash::decode::launch_decode<T, HEAD_DIM, PAGED>(              \
      const djl_attn::flash::decode::DecodeArgs&, cudaStream_t);
#define DJL_FLASH_DECODE_EXTERN_(T)            \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, false)   \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 64, true)    \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, false)  \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 128, true)   \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, false)  \
  DJL_FLASH_DECODE_EXTERN_ONE_(T, 256, true)
DJL_FLASH_DECODE_EXTERN_(__half)
DJL_FLASH_DECODE_EXTERN_(__nv_bfloat16)

namespace djl_attn::flash::decode {
namespace {

// The most key ranges: the combine kernel keeps one weight per range in shared memory
// (kMaxCombineSplits there).
constexpr int kMaxSplits = kMaxCombineSplits;
// A range is at least this many key tiles: shorter ones spend more on the prologue, the merge
// and the scratch round trip than they gain in parallelism.
constexpr int kMinTilesPerSplit = 2;
constexpr int64_t kMaxGridX = 0x7fffffffLL;

int smem_bytes(int64_t head_dim) {
  switch (head_dim) {
    case 64: return DecodeTile<64>::kSmemBytes;
    case 128: return DecodeTile<128>::kSmemBytes;
    case 256: return DecodeTile<256>::kSmemBytes;
    default: return 0;
  }
}

// The number of key ranges: the fewest whose waves are within 95% of the best wave efficiency
// (how full the last wave of blocks is) over 1..max ranges, counting the ranges that whole tiles
// per range actually give. A memory-bound kernel wants every SM streaming until the end; each
// extra range costs a prologue, a scratch row and a share of the combine pass.
int choose_splits(int64_t blocks, int64_t slots, int n_tiles) {
  const int max_splits = std::min(kMaxSplits, std::max(1, n_tiles / kMinTilesPerSplit));
  auto actual = [&](int s) {
    const int per = std::max(1, (n_tiles + s - 1) / s);
    return std::max(1, (n_tiles + per - 1) / per);
  };
  auto efficiency = [&](int s) {
    const double waves = static_cast<double>(blocks) * s / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(actual(s)));
  for (int s = 1; s <= max_splits; ++s) {
    if (efficiency(actual(s)) >= 0.95 * best) return actual(s);
  }
  return 1;
}

template <typename T, int kHeadDim, bool kPaged>
void run_typed(const FlashParams& params, const PagedRows* paged, cudaStream_t stream, int device) {
  DecodeArgs args{};
  args.params = params;
  const FlashParams& p = args.params;
  if constexpr (kPaged) {
    args.block_tables = paged->block_tables;
    args.table_stride = paged->table_stride;
    int shift = 0;
    while ((1 << shift) < paged->block_size) ++shift;
    args.block_shift = shift;
  }
  const int64_t blocks = p.batch * p.heads_q;
  if (blocks > kMaxGridX) {
    fail_invalid("flash decode: batch * heads = ", blocks, " exceeds the CUDA grid limit of ",
                 kMaxGridX, " blocks");
  }
  const int per_sm = decode_blocks_per_sm<T, kHeadDim, kPaged>(device);
  const int n_tiles = static_cast<int>((p.seqlen_k + DecodeTile<kHeadDim>::kBlockN - 1) /
                                       DecodeTile<kHeadDim>::kBlockN);
  const int64_t slots = static_cast<int64_t>(cuda::multiprocessor_count(device)) * per_sm;
  int splits = choose_splits(blocks, slots, n_tiles);
  args.n_blocks_per_split = std::max(1, (n_tiles + splits - 1) / splits);
  splits = std::max(1, (n_tiles + args.n_blocks_per_split - 1) / args.n_blocks_per_split);
  args.num_splits = splits;
  Tensor o_accum, lse_accum;  // scratch from PyTorch's caching allocator, freed on return
  if (splits > 1) {
    // Stream order makes the early free safe: the allocator hands the memory to later work on
    // this stream only.
    args.accum_rows = p.batch * p.seqlen_q;
    const Device dev{DeviceType::kCuda, device};
    o_accum = Tensor::empty({splits, p.heads_q, args.accum_rows, p.head_dim}, DType::kFloat32, dev);
    lse_accum = Tensor::empty({splits, p.heads_q, args.accum_rows}, DType::kFloat32, dev);
    args.o_accum = o_accum.data_as<float>();
    args.lse_accum = lse_accum.data_as<float>();
  }
  launch_decode<T, kHeadDim, kPaged>(args, stream);
  if (splits > 1) {
    fwd::FwdArgs combine{};
    combine.params = p;
    combine.m_blocks = 1;
    combine.num_splits = splits;
    combine.n_blocks_per_split = args.n_blocks_per_split;
    combine.o_accum = args.o_accum;
    combine.lse_accum = args.lse_accum;
    combine.accum_rows = args.accum_rows;
    launch_flash_combine(combine, stream);
  }
}

template <typename T, bool kPaged>
void run_head_dim(const FlashParams& p, const PagedRows* paged, cudaStream_t stream, int device) {
  switch (p.head_dim) {
    case 64: return run_typed<T, 64, kPaged>(p, paged, stream, device);
    case 128: return run_typed<T, 128, kPaged>(p, paged, stream, device);
    case 256: return run_typed<T, 256, kPaged>(p, paged, stream, device);
    default: fail_native("flash decode: no kernel for head dim ", p.head_dim);
  }
}

template <typename T>
void run_dtype(const FlashParams& p, const PagedRows* paged, cudaStream_t stream, int device) {
  if (paged != nullptr) {
    run_head_dim<T, true>(p, paged, stream, device);
  } else {
    run_head_dim<T, false>(p, paged, stream, device);
  }
}

}  // namespace

bool head_dim_compiled(int64_t head_dim) { return smem_bytes(head_dim) != 0; }

bool runs_on(int64_t head_dim, int device) {
  if (!head_dim_compiled(head_dim)) return false;
  int major = 0, smem_optin = 0;
  DJL_ATTN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DJL_ATTN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return major >= 8 && smem_optin >= smem_bytes(head_dim);
}

void run(const FlashParams& p, const PagedRows* paged, cudaStream_t stream, int device) {
  if (p.seqlen_q < 1 || p.seqlen_q > kMaxRows) {
    fail_native("flash decode: expected 1 to ", kMaxRows, " query rows per block, got ",
                p.seqlen_q);
  }
  if (p.cu_seqlens_q != nullptr || p.q_bias != nullptr || p.k_bias != nullptr ||
      p.v_bias != nullptr) {
    fail_native("flash decode: varlen batches and q/k/v bias are not supported");
  }
  // A warp's 16 key rows may span at most two cache blocks (the table lookups assume it).
  if (paged != nullptr &&
      (paged->block_size < 8 || (paged->block_size & (paged->block_size - 1)) != 0)) {
    fail_native("flash decode: block size must be a power of two >= 8, got ", paged->block_size);
  }
  if (p.batch == 0 || p.heads_q == 0) return;  // an empty grid launches nothing
  switch (p.dtype) {
    case ElementType::kFloat16: return run_dtype<__half>(p, paged, stream, device);
    case ElementType::kBFloat16: return run_dtype<__nv_bfloat16>(p, paged, stream, device);
    default: fail_native("flash decode: unsupported element type ", static_cast<int>(p.dtype));
  }
}

}  // namespace djl_attn::flash::decode
