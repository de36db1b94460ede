// Host side of the Hopper e4m3 flash forward (sm_90a only; see flash_hopper.h), and the one
// kernel of its own: the transpose of v it reads.
//
// FP8 wgmma reads both of its shared-memory operands K-major (it has no transpose, unlike the
// 16-bit forms), and the K of O += P V is the keys: v must sit in shared memory as [D][keys].
// FlashAttention-3 transposes each tile inside the kernel (ldmatrix / stmatrix by its producer
// warps); here one pass before the kernel writes v^T for the whole call into scratch (B * Hkv *
// D * Sk bytes, read and written once: small beside the attention's own reads of v, once per
// query tile), and the kernel loads it with TMA like q and k.
//
// The same pass absorbs the other FP8 mismatch: the score accumulator gives each thread the
// probabilities of keys 2t, 2t + 1, 8 + 2t, 9 + 2t (and 16 + ..) of every 32, where the e4m3 A
// fragment of the next wgmma expects keys 4t .. 4t + 3 (and 16 + ..) in a register's four bytes.
// FlashAttention-3 moves the bytes between threads (byte permutes and shuffles); here the
// consumers pack them as they lie (hopper_mainloop.cuh, pack_p) and the transpose writes each
// group of 32 keys in that same order (fp8_key_of_column), so the products pair up unchanged.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/flash/hopper/flash_hopper.h"
#include "cuda/flash/hopper/hopper_kernel.cuh"
#include "cuda/flash/hopper/hopper_tensor_map.h"

namespace djl_attn::flash::hopper {
namespace {

// The e4m3 kernel's one instantiation (flash_fp8_plan.cpp plans for it).
constexpr int kHeadDim = 128;
constexpr int kConsumers = 2;
using Fp8Layout = Layout<kHeadDim, kConsumers, 1>;
constexpr int kKeyTile = Fp8Layout::kBlockN;  // keys per tile of the transposed v (128)

// The key that column l (0 .. 31) of each 32-key group of the transposed v holds: the key whose
// probability lands in byte l of the A fragment as pack_p packs it. Byte i of the register
// holding columns 4t .. 4t + 3 (16 + ..) came from accumulator column 8 * (i / 2) + 2t + i % 2.
__host__ __device__ constexpr int fp8_key_of_column(int l) {
  const int half = l / 16, t = (l % 16) / 4, i = l % 4;
  return 16 * half + 8 * (i / 2) + 2 * t + i % 2;
}

constexpr bool is_permutation_of_32() {
  unsigned seen = 0;
  for (int l = 0; l < 32; ++l) seen |= 1u << fp8_key_of_column(l);
  return seen == 0xffffffffu;
}
static_assert(is_permutation_of_32(), "every key of a group exactly once");

// Rows of the transpose's shared tile: 128 bytes of one key's head dim plus 4 bytes of padding,
// and 32 bytes more per group of 32 keys, so that the word reads below (one word of 4 head-dim
// bytes from each of 16 keys per half-warp) fall on distinct banks but for 2-way conflicts.
__device__ __forceinline__ int tile_offset(int key) { return key * (kHeadDim + 4) + key / 32 * 32; }
constexpr int kTileBytes = (kKeyTile - 1) * (kHeadDim + 4) + (kKeyTile - 1) / 32 * 32 + kHeadDim;

// The transpose of a 4 x 4 block of bytes: rows r[0..3] (a byte per column) to columns.
__device__ __forceinline__ void transpose_4x4(const uint32_t (&r)[4], uint32_t (&c)[4]) {
  const uint32_t t0 = __byte_perm(r[0], r[1], 0x5140), t1 = __byte_perm(r[2], r[3], 0x5140);
  const uint32_t t2 = __byte_perm(r[0], r[1], 0x7362), t3 = __byte_perm(r[2], r[3], 0x7362);
  c[0] = __byte_perm(t0, t1, 0x5410);
  c[1] = __byte_perm(t0, t1, 0x7632);
  c[2] = __byte_perm(t2, t3, 0x5410);
  c[3] = __byte_perm(t2, t3, 0x7632);
}

// v [B, Sk, Hkv, D] e4m3 -> vt [B, Hkv, D, keys_padded], keys permuted within each group of 32
// (fp8_key_of_column) and zero from each row's valid length (kv_lens) on: the kernel then needs
// no masking of v. One block per 128-key tile of one (batch, kv head), 256 threads: the tile read
// in 16-byte rows into shared memory; then each thread takes 4 head-dim rows x 8 keys of the
// output: 8 word reads (4 bytes of d for one key each), two 4 x 4 byte transposes in registers,
// and 4 stores of 8 bytes, a half-warp writing 128 contiguous bytes of one row of vt.
__global__ void __launch_bounds__(256) transpose_v_fp8(const uint8_t* __restrict__ v,
                                                       int64_t batch_stride, int64_t seq_stride,
                                                       int64_t head_stride,
                                                       const int32_t* __restrict__ kv_lens,
                                                       int seqlen_k, int heads_kv, int key_tiles,
                                                       int64_t keys_padded, uint8_t* __restrict__ vt) {
  __shared__ __align__(16) uint8_t tile[kTileBytes];
  const int tile_idx = blockIdx.x % key_tiles;
  const int bh = blockIdx.x / key_tiles;
  const int b = bh / heads_kv, h = bh % heads_kv;
  const int n0 = tile_idx * kKeyTile;
  const int kv_len = kv_lens != nullptr ? min(max(kv_lens[b], 0), seqlen_k) : seqlen_k;
  const uint8_t* src = v + b * batch_stride + h * head_stride;
  constexpr int kChunksPerRow = kHeadDim / 16;
  for (int c = threadIdx.x; c < kKeyTile * kChunksPerRow; c += blockDim.x) {
    const int r = c / kChunksPerRow, col = c % kChunksPerRow * 16;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (n0 + r < kv_len) x = *reinterpret_cast<const uint4*>(src + (n0 + r) * seq_stride + col);
    uint32_t* to = reinterpret_cast<uint32_t*>(tile + tile_offset(r) + col);
    to[0] = x.x;
    to[1] = x.y;
    to[2] = x.z;
    to[3] = x.w;
  }
  __syncthreads();
  uint8_t* dst = vt + (static_cast<int64_t>(b) * heads_kv + h) * kHeadDim * keys_padded + n0;
  constexpr int kRuns = kKeyTile / 8;  // 8-key runs per output row
  for (int c = threadIdx.x; c < kHeadDim / 4 * kRuns; c += blockDim.x) {
    const int l0 = c % kRuns * 8, d0 = c / kRuns * 4;
    uint32_t rows[2][4], cols[2][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int l = l0 + j;
      const int key = l / 32 * 32 + fp8_key_of_column(l % 32);
      rows[j / 4][j % 4] = *reinterpret_cast<const uint32_t*>(tile + tile_offset(key) + d0);
    }
    transpose_4x4(rows[0], cols[0]);
    transpose_4x4(rows[1], cols[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      *reinterpret_cast<uint2*>(dst + (d0 + e) * keys_padded + l0) = make_uint2(cols[0][e], cols[1][e]);
    }
  }
}

template <typename TOut>
void launch_kernel(const HopperArgs& args, int grid, cudaStream_t stream, int device) {
  constexpr auto kernel = flash_hopper_kernel<__nv_fp8_e4m3, kHeadDim, kConsumers, true, TOut>;
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> prepared[kMaxDevices];
  if (device < 0 || device >= kMaxDevices || !prepared[device].load()) {
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Fp8Layout::kSmemBytes));
    if (device >= 0 && device < kMaxDevices) prepared[device].store(true);
  }
  kernel<<<static_cast<unsigned>(grid), threads(kConsumers), Fp8Layout::kSmemBytes, stream>>>(args);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_hopper_kernel (e4m3)");
}

}  // namespace

void run_fp8(const FlashFp8Params& fp, const FlashFp8Plan& plan, uint8_t* vt, int* item_counter,
             cudaStream_t stream, int device) {
  const FlashParams& p = fp.attn;
  const int key_tiles = static_cast<int>(plan.keys_padded / kKeyTile);
  if (p.seqlen_k > 0) {
    const int64_t blocks = static_cast<int64_t>(key_tiles) * p.batch * p.heads_kv;
    transpose_v_fp8<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        static_cast<const uint8_t*>(p.v), p.v_batch_stride, p.v_seq_stride, p.v_head_stride,
        p.kv_lens, static_cast<int>(p.seqlen_k), static_cast<int>(p.heads_kv), key_tiles,
        plan.keys_padded, vt);
    DJL_ATTN_CUDA_CHECK_LAUNCH("transpose_v_fp8");
  }

  HopperArgs args{};
  args.params = p;
  args.m_blocks = plan.m_blocks;
  args.total_items = plan.items;
  args.q_descale = fp.q_descale;
  args.k_descale = fp.k_descale;
  args.v_descale = fp.v_descale;
  // A call without keys loads nothing (every item has no key tiles), but its maps must still be
  // valid ones: k's is q's then (k may have a batch stride of 0, which TMA cannot describe).
  const auto u64 = [](int64_t x) { return static_cast<cuuint64_t>(std::max<int64_t>(x, 1)); };
  const cuuint64_t q_dims[4] = {u64(p.head_dim), u64(p.seqlen_q), u64(p.heads_q), u64(p.batch)};
  const cuuint64_t q_strides[3] = {u64(p.q_seq_stride), u64(p.q_head_stride), u64(p.q_batch_stride)};
  const cuuint64_t k_dims[4] = {u64(p.head_dim), u64(p.seqlen_k), u64(p.heads_kv), u64(p.batch)};
  const cuuint64_t k_strides[3] = {u64(p.k_seq_stride), u64(p.k_head_stride), u64(p.k_batch_stride)};
  const cuuint64_t vt_dims[4] = {u64(plan.keys_padded), u64(p.head_dim), u64(p.heads_kv),
                                 u64(p.batch)};
  const cuuint64_t vt_strides[3] = {u64(plan.keys_padded), u64(p.head_dim * plan.keys_padded),
                                    u64(p.heads_kv * p.head_dim * plan.keys_padded)};
  constexpr CUtensorMapDataType kBytes = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  if (!make_tiled_map(&args.q_map, kBytes, p.q, q_dims, q_strides, kRowBytes, Fp8Layout::kBlockM) ||
      (p.seqlen_k > 0 ? !make_tiled_map(&args.k_map, kBytes, p.k, k_dims, k_strides, kRowBytes,
                                         Fp8Layout::kBlockN)
                      : !make_tiled_map(&args.k_map, kBytes, p.q, q_dims, q_strides, kRowBytes,
                                         Fp8Layout::kBlockN)) ||
      !make_tiled_map(&args.v_map, kBytes, vt, vt_dims, vt_strides, kKeyTile, kHeadDim)) {
    fail_native("flash_attention_fp8: cuTensorMapEncodeTiled refused a tensor map the plan "
                "accepted (or the CUDA driver has no cuTensorMapEncodeTiled)");
  }
  args.item_counter = item_counter;
  DJL_ATTN_CUDA_CHECK(cudaMemsetAsync(args.item_counter, 0, sizeof(int), stream));
  if (p.dtype == ElementType::kFloat16) {
    launch_kernel<__half>(args, plan.grid, stream, device);
  } else {
    launch_kernel<__nv_bfloat16>(args, plan.grid, stream, device);
  }
}

}  // namespace djl_attn::flash::hopper
