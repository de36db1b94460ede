// The FlashAttention-2 forward kernel for float16 and bfloat16 on sm_80 and later.
//
// One thread block computes one query tile of one (batch, head), or of one key range of it when
// the keys are split (flash-decoding). The query tile stays in shared memory; key/value tiles
// stream through a cp.async ring of kStages buffers, so that the next tile loads while this one
// is multiplied. Each warp (4 by default) owns kMTiles * 16 whole query rows, so the softmax
// statistics and the output accumulator of a row live in one warp's registers and no
// reduction across warps is needed. S = Q K^T and O += P V run on tensor cores
// (mma.sync m16n8k16, operands read with ldmatrix), the softmax is online with the division by
// the row sum deferred to the end, and the logsumexp of every row is written.
//
// Included only by the instantiation files (flash_fwd_hdim*.cu, and flash_fwd_hdim*_cfg_*.cu for
// the tuning configurations of flash_shapes.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common/convert.cuh"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/mma.cuh"
#include "cuda/flash/flash_fwd.cuh"

namespace djl_attn::flash::fwd {

// ---- tile shapes -------------------------------------------------------------------------------

// kBlockM query rows x kBlockN keys per step. Every base shape keeps dynamic shared memory at
// or below 96 KiB, so that all sm_80+ parts (sm_86/89 have 99 KiB per block) run every head dim.
// Registers (ptxas, sm_90, no bias): 128-row tiles 182 at D = 32, 240 at D = 64, and all 255
// with 60-68 bytes spilled at D = 96 and 128; 64-row tiles 100-176, no spills; D = 256 255, no
// spills.
// kSmallM: 64-row query tiles for problems with at most 64 query rows (decoding, folded query
// groups, short chunks against long caches). 128-row tiles would spend half of each tile's
// tensor-core and exp work on zero rows, which at D = 128 costs about as long as reading the
// K/V tile.
// kCfg != 0: the shape of kFwdConfigs[kCfg] (tuning alternatives, see flash_shapes.h).
template <int kHeadDim, bool kSmallM, int kCfg = 0>
struct Tile {
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head dim must be a multiple of 32");
  static_assert(kCfg >= 0 && kCfg < kNumFwdConfigs, "configuration index");
  static constexpr bool kBase = kCfg == 0;  // the base tiles, kFwdConfigs[0]
  // The shape is the plan's (flash_shapes.h): one definition for the kernel and its launcher.
  static constexpr TileShape kShape = tile_shape(kHeadDim, kSmallM, kCfg);
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kStages = kShape.stages;
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = kWarps * 32;
  // 0 leaves the bound unset: the PTX of the base kernels is what it was before the
  // configurations existed (an explicit 1 changes ptxas's register choices).
  static constexpr int kMinBlocks = kBase ? 0 : kFwdConfigs[kCfg].min_blocks;
  // Scores stay unscaled until the exponent, where the scale folds into one FFMA.
  static constexpr bool kFusedScale = !kBase && kFwdConfigs[kCfg].fused_scale;
  // The output goes through shared memory for 16-byte stores (not in split mode).
  static constexpr bool kStageO = !kBase && kFwdConfigs[kCfg].stage_o;
  // The running max moves (and acc_o is rescaled) only when it grows by more than a margin.
  static constexpr bool kLazyRescale = !kBase && kFwdConfigs[kCfg].lazy_rescale;
  static_assert(kBlockM % (16 * kWarps) == 0, "whole m16 tiles per warp");
  static_assert(kBlockN % 16 == 0 && kStages >= 2, "k16 steps over the keys; a ring");
  static constexpr int kMTiles = kBlockM / (16 * kWarps);  // m16 tiles per warp
  static constexpr int kChunks = kHeadDim / 8;             // 16-byte chunks per row
  static constexpr int kSmemElems = (kBlockM + 2 * kStages * kBlockN) * kHeadDim;
  static constexpr int kSmemBytes = kSmemElems * 2;
  static_assert(kSmemBytes == tile_smem_bytes(kHeadDim, kSmallM, kCfg), "the plan's size");
};

// ---- shared-memory layout ----------------------------------------------------------------------

// Element offset of 16-byte chunk `c` of row `r` in a [rows, kHeadDim] tile. Within each group
// of kGroup chunks the chunk index is XOR-swizzled with low row bits, so that the 8 row
// addresses of one ldmatrix phase (8 consecutive rows, same logical chunk) fall in 8 different
// 16-byte bank groups, and so do cp.async writes. With 8 chunks per group (D = 64, 128, 256)
// rows are multiples of 128 bytes and the low three row bits select the chunk; with groups of
// 4 (D = 32, 96: rows of 64 or 192 bytes) consecutive rows alternate between the two halves
// of a 128-byte line, so row bits 1-2 pick the chunk within the half.
template <int kHeadDim>
struct Swizzle {
  static constexpr int kGroup = (kHeadDim / 8) % 8 == 0 ? 8 : 4;
  static_assert((kHeadDim / 8) % kGroup == 0, "whole swizzle groups per row");
  __device__ static __forceinline__ int row_bits(int r) {
    return kGroup == 8 ? (r & 7) : ((r >> 1) & 3);
  }
  __device__ static __forceinline__ int offset(int r, int c) {
    return r * kHeadDim + ((c / kGroup) * kGroup + ((c % kGroup) ^ row_bits(r))) * 8;
  }
  // For fragment loads: the byte offset of chunk `lane_c` (< kGroup) of row `r`. Chunk
  // lane_c + c (c a multiple of 2 known at compile time, lane_c in {0, 1}) of row r + 8k is
  // then at at(lane_offset, c) + 8k * row bytes: the XOR becomes one immediate operation, and a
  // warp keeps one address register per operand instead of one per fragment.
  __device__ static __forceinline__ uint32_t lane_offset(int r, int lane_c) {
    return static_cast<uint32_t>(r * kHeadDim * 2 + ((row_bits(r) ^ lane_c) * 16));
  }
  __device__ static __forceinline__ uint32_t at(uint32_t lane_off, int c) {
    return (lane_off ^ static_cast<uint32_t>((c % kGroup) * 16)) +
           static_cast<uint32_t>((c / kGroup) * kGroup * 16);
  }
};

template <int kHeadDim>
__device__ __forceinline__ int smem_offset(int r, int c) {
  return Swizzle<kHeadDim>::offset(r, c);
}

// ---- PTX wrappers ------------------------------------------------------------------------------

using cuda::ptx::fast_exp2;
using cuda::ptx::ldmatrix_x4;
using cuda::ptx::ldmatrix_x4_trans;
using cuda::ptx::mma_16816;
using cuda::ptx::pack2;
using cuda::ptx::smem_addr;

using cuda::ptx::cp_async_commit;
using cuda::ptx::cp_async_wait;

// One 16-byte chunk to a shared-memory pointer, zero-filled past `src_bytes` (0 or 16): the
// flash tile and decode kernels address shared memory by pointer, cp_async.cuh by address.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
  cuda::ptx::cp_async_16(smem_addr(dst), src, src_bytes);
}

// ---- global -> shared tiles --------------------------------------------------------------------

// Loads rows [0, kRows) of a tile whose row r starts at `src + r * row_stride`; rows at or past
// `valid_rows` and columns at or past `dim` become zeros (zero keys score 0 and are masked; zero
// values times a probability of 0 stay 0, where stale data could be NaN). The plan
// guarantees D % 8 == 0 and 16-byte aligned rows, so a 16-byte chunk is wholly in or out.
// Each thread walks its rows with one running pointer: hoisted per-row addresses cost more
// registers than the main loop can spare.
template <typename T, int kHeadDim, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T* tile, const T* src, int64_t row_stride,
                                          int valid_rows, int dim) {
  constexpr int kChunks = kHeadDim / 8;
  static_assert(kThreads % kChunks == 0 || kChunks % 4 == 0, "chunks per row");
  constexpr int kTotal = kRows * kChunks;
  static_assert(kTotal % kThreads == 0, "whole passes over the tile");
  if constexpr (kThreads % kChunks == 0) {
    constexpr int kRowsPerPass = kThreads / kChunks;
    const int r0 = static_cast<int>(threadIdx.x) / kChunks;
    const int c = static_cast<int>(threadIdx.x) % kChunks;
    const bool col_ok = c * 8 < dim;
    const T* from = src + r0 * row_stride + c * 8;
#pragma unroll
    for (int it = 0; it < kTotal / kThreads; ++it) {
      const int r = r0 + it * kRowsPerPass;
      const bool ok = col_ok && r < valid_rows;
      cp_async_16(tile + smem_offset<kHeadDim>(r, c), ok ? from : src, ok ? 16 : 0);
      from += kRowsPerPass * row_stride;
    }
  } else {
    // D = 96: 12 chunks per row do not divide the block, so rows and chunks vary per pass.
#pragma unroll
    for (int it = 0; it < kTotal / kThreads; ++it) {
      const int idx = it * kThreads + static_cast<int>(threadIdx.x);
      const int r = idx / kChunks;
      const int c = idx % kChunks;
      const bool ok = c * 8 < dim && r < valid_rows;
      cp_async_16(tile + smem_offset<kHeadDim>(r, c), ok ? src + r * row_stride + c * 8 : src,
                  ok ? 16 : 0);
    }
  }
}

// Adds bias[d] (d < dim) to rows [0, valid_rows) of a resident tile. The caller synchronises.
template <typename T, int kHeadDim, int kRows, int kThreads>
__device__ __forceinline__ void add_bias(T* tile, const T* bias, int valid_rows, int dim) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kTotal = kRows * kChunks;
  for (int idx = threadIdx.x; idx < kTotal; idx += kThreads) {
    const int r = idx / kChunks;
    const int c = idx % kChunks;
    if (r >= valid_rows) continue;
    T* chunk = tile + smem_offset<kHeadDim>(r, c);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int d = c * 8 + e;
      if (d < dim) chunk[e] = cuda::from_float<T>(cuda::to_float(chunk[e]) + cuda::to_float(bias[d]));
    }
  }
}

// ---- the kernel --------------------------------------------------------------------------------

// kBias: q/k/v bias added in shared memory as tiles arrive (the fused BERT path). A template
// flag because the extra pass costs 30 registers at D = 128, where there are none to spare.
// kFeatures: the sliding window, soft-capping and ALiBi (FlashParams), base tiles without bias
// only. A template flag too: as a run-time branch per key tile in the plain kernel it moved
// ptxas's allocation of the default path (sm_90, D = 96: 68 -> 100 bytes spilled, 64-row tiles
// 176 -> 225 registers), and the default path must not pay for them. The price is two more
// instantiations per (dtype, head dim).
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures>
__global__ void __launch_bounds__(Tile<kHeadDim, kSmallM, kCfg>::kThreads,
                                  Tile<kHeadDim, kSmallM, kCfg>::kMinBlocks)
    flash_fwd_kernel(const FwdArgs args) {
  using Tl = Tile<kHeadDim, kSmallM, kCfg>;
  constexpr int kBlockM = Tl::kBlockM, kBlockN = Tl::kBlockN, kStages = Tl::kStages;
  constexpr int kMTiles = Tl::kMTiles, kThreads = Tl::kThreads;
  constexpr bool kFusedScale = Tl::kFusedScale, kLazyRescale = Tl::kLazyRescale;
  constexpr int kNTiles = kBlockN / 8;   // n8 score tiles per row block
  constexpr int kDTiles = kHeadDim / 8;  // n8 output tiles per row block
  static_assert(!kFeatures || (Tl::kBase && !kBias), "features: base tiles without bias");

  extern __shared__ uint4 smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);
  T* const s_k = s_q + kBlockM * kHeadDim;
  T* const s_v = s_k + kStages * kBlockN * kHeadDim;

  const FlashParams& p = args.params;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  // m blocks vary fastest, so consecutive blocks read the same keys and values from L2. They
  // run last tile first: with a causal mask the last query tiles see the most keys, and
  // starting the longest work first keeps the final wave short.
  const int m_block = args.m_blocks - 1 - static_cast<int>(blockIdx.x % args.m_blocks);
  const int64_t bh = blockIdx.x / args.m_blocks;
  const int64_t b = bh / p.heads_q;
  const int64_t h = bh % p.heads_q;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int split = blockIdx.y;

  const SeqExtent<int> seq(p, b);  // flash_params.h
  const int64_t q_row0 = seq.q_row0, k_row0 = seq.k_row0;
  const int seqlen_q = seq.seqlen_q;
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;  // a shorter sequence of a varlen batch; the whole block leaves
  int kv_len = seq.kv_len(p, b);
  const int dim = static_cast<int>(p.head_dim);
  // Query row i sees key j iff j <= i + diagonal (bottom-right aligned).
  const int diagonal = kv_len - seqlen_q;

  // Key tiles this block needs: all valid keys, cut at the causal limit of its last row, so
  // that tiles wholly above the diagonal are never loaded. With a sliding window the range is
  // also cut at the window's edges (tiles wholly outside it are skipped, not masked), and the
  // splits share the tiles from the window's first.
  int key_end = kv_len;
  if (p.causal) key_end = min(max(min(m0 + kBlockM, seqlen_q) - 1 + diagonal + 1, 0), kv_len);
  int n_first = 0;
  if constexpr (kFeatures) {
    const KeyRange keys =
        visible_keys(p, diagonal, kv_len, m0, min(m0 + kBlockM, seqlen_q) - 1);
    n_first = static_cast<int>(keys.begin) / kBlockN;
    key_end = keys.end > keys.begin ? static_cast<int>(keys.end) : n_first * kBlockN;
  }
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;
  const int n_begin = min(n_first + split * args.n_blocks_per_split, n_blocks);
  const int n_end = min(n_begin + args.n_blocks_per_split, n_blocks);

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + (q_row0 + m0) * p.q_seq_stride +
               h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + k_row0 * p.k_seq_stride +
               h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + k_row0 * p.v_seq_stride +
               h_kv * p.v_head_stride;

  auto load_kv = [&](int n, int stage) {
    const int n0 = n * kBlockN;
    load_tile<T, kHeadDim, kBlockN, kThreads>(s_k + stage * kBlockN * kHeadDim,
                                              k + n0 * p.k_seq_stride, p.k_seq_stride,
                                              kv_len - n0, dim);
    load_tile<T, kHeadDim, kBlockN, kThreads>(s_v + stage * kBlockN * kHeadDim,
                                              v + n0 * p.v_seq_stride, p.v_seq_stride,
                                              kv_len - n0, dim);
  };

  // Prologue: the query tile, then the first kStages - 1 key/value tiles, one commit group
  // each (empty groups too, so that group counting stays uniform).
  load_tile<T, kHeadDim, kBlockM, kThreads>(s_q, q, p.q_seq_stride, seqlen_q - m0, dim);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s);
    cp_async_commit();
  }

  float acc_o[kMTiles][kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] = 0.f;
  // Per thread: rows g and g + 8 of each m16 tile (g = lane / 4). The running maximum is of
  // scores already multiplied by scale * log2(e); the sum is this thread's partial sum over
  // its columns, reduced across the quad once at the end.
  float row_max[kMTiles][2], row_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  const float scale_log2 = p.scale * 1.4426950408889634f;
  const int warp_row0 = warp * kMTiles * 16;  // first row of this warp within the tile
  const int g = lane / 4, t = lane % 4;

  // Fragment addresses (see Swizzle::lane_offset). Each ldmatrix.x4 reads four 8x8 matrices,
  // lanes 8i..8i+7 giving the row addresses of matrix i:
  // Q (A operand of S = Q K^T): rows 0-7 / 8-15 of an m16 tile at chunk 2kk, then at 2kk + 1.
  // K (B operand): keys 0-7 at chunks 2kk, 2kk + 1, then keys 8-15 likewise, which are b0, b1
  //   of two n8 tiles.
  // V (B operand of O += P V, transposed): keys 0-7 / 8-15 at chunk 2dp, then at 2dp + 1,
  //   which are b0, b1 of output tiles 2dp and 2dp + 1.
  using Sw = Swizzle<kHeadDim>;
  constexpr uint32_t kRowBytes = kHeadDim * 2;
  const uint32_t q_addr = smem_addr(s_q);
  const uint32_t q_lane = Sw::lane_offset(warp_row0 + lane % 16, lane / 16);
  const uint32_t k_lane = Sw::lane_offset(lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const uint32_t v_lane = Sw::lane_offset(lane % 8 + ((lane / 8) % 2) * 8, lane / 16);

  for (int n = n_begin; n < n_end; ++n) {
    const int stage = (n - n_begin) % kStages;
    cp_async_wait<kStages - 2>();
    // Tile n is resident for every thread, and every warp is done with tile n - 1, whose
    // buffer the prefetch below overwrites.
    __syncthreads();
    {
      const int next = n + kStages - 1;
      if (next < n_end) load_kv(next, (next - n_begin) % kStages);
      cp_async_commit();
    }
    const T* s_k_tile = s_k + stage * kBlockN * kHeadDim;
    const T* s_v_tile = s_v + stage * kBlockN * kHeadDim;
    const uint32_t k_addr = smem_addr(s_k_tile);
    const uint32_t v_addr = smem_addr(s_v_tile);
    if constexpr (kBias) {
      const int n0 = n * kBlockN;
      if (n == n_begin && p.q_bias != nullptr) {
        add_bias<T, kHeadDim, kBlockM, kThreads>(s_q, static_cast<const T*>(p.q_bias) + h * dim,
                                                 seqlen_q - m0, dim);
      }
      if (p.k_bias != nullptr) {
        add_bias<T, kHeadDim, kBlockN, kThreads>(const_cast<T*>(s_k_tile),
                                                 static_cast<const T*>(p.k_bias) + h_kv * dim,
                                                 kv_len - n0, dim);
      }
      if (p.v_bias != nullptr) {
        add_bias<T, kHeadDim, kBlockN, kThreads>(const_cast<T*>(s_v_tile),
                                                 static_cast<const T*>(p.v_bias) + h_kv * dim,
                                                 kv_len - n0, dim);
      }
      __syncthreads();
    }

    // S = Q K^T for this warp's rows and the tile's kBlockN keys.
    float acc_s[kMTiles][kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ldmatrix_x4(a[mt], q_addr + Sw::at(q_lane, kk * 2) + mt * 16 * kRowBytes);
      }
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, k_addr + Sw::at(k_lane, kk * 2) + np * 16 * kRowBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(acc_s[mt][2 * np], a[mt], bk[0], bk[1]);
          mma_16816<T>(acc_s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Scale into the log2 domain, and mask where the tile crosses the end of the valid keys or
    // the causal diagonal (interior tiles skip the per-element test).
    const int n0 = n * kBlockN;
    if constexpr (kFeatures) {
      // Every score: the window's mask (bounds per row), soft-capping and ALiBi in the
      // natural-log domain, then into the log2 domain.
      const float slope = alibi_slope(p, b, h);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int pos = m0 + warp_row0 + mt * 16 + g + hf * 8 + diagonal;
          const RowKeys<int> keys = row_keys(p, pos, kv_len);
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
            for (int e = 2 * hf; e < 2 * hf + 2; ++e) {
              const int col = n0 + nt * 8 + 2 * t + (e & 1);
              acc_s[mt][nt][e] =
                  col < keys.lo || col > keys.hi
                      ? -INFINITY
                      : modify_score(acc_s[mt][nt][e] * p.scale, p.softcap, slope,
                                     static_cast<float>(abs(pos - col))) *
                            1.4426950408889634f;
            }
        }
    } else {
      const bool need_mask =
          n0 + kBlockN > kv_len || (p.causal && n0 + kBlockN - 1 > m0 + diagonal);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float s = kFusedScale ? acc_s[mt][nt][e] : acc_s[mt][nt][e] * scale_log2;
            if (need_mask) {
              const int row = m0 + warp_row0 + mt * 16 + g + (e >= 2 ? 8 : 0);
              const int col = n0 + nt * 8 + 2 * t + (e & 1);
              if (col >= kv_len || (p.causal && col > row + diagonal)) s = -INFINITY;
            }
            acc_s[mt][nt][e] = s;
          }
    }

    // Online softmax: new row maxima, rescale what was accumulated, exponentiate.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = kFusedScale ? -INFINITY : row_max[mt][hf];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mx = fmaxf(mx, fmaxf(acc_s[mt][nt][2 * hf], acc_s[mt][nt][2 * hf + 1]));
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // Unscaled scores: the tile maximum scales like every score (scale > 0, see the
        // plan), and -inf stays -inf.
        if constexpr (kFusedScale) mx = fmaxf(row_max[mt][hf], mx * scale_log2);
        // A row with nothing visible yet keeps max -inf; subtracting 0 instead keeps
        // exp2(-inf - max) at 0 rather than NaN.
        float base, sum;
        if constexpr (kLazyRescale) {
          // row_max is the base that the row's sum and acc_o are relative to; it may trail the
          // row's true maximum by up to kLazyMargin, so probabilities reach 2^kLazyMargin = 256
          // (exact enough in fp16/bf16, far from float32 overflow). Invariant: every score seen
          // is <= base + kLazyMargin. The warp rebases, each row to its mx, only when some row
          // broke it, so most tiles skip the rescale's 2 * D / 8 multiplies per row half; the
          // vote keeps the branch warp-uniform.
          constexpr float kLazyMargin = 8.f;
          if (__any_sync(0xffffffffu, mx > row_max[mt][hf] + kLazyMargin)) {
            base = mx == -INFINITY ? 0.f : mx;
            const float correction = fast_exp2(row_max[mt][hf] - base);
            row_max[mt][hf] = mx;
            sum = row_sum[mt][hf] * correction;
#pragma unroll
            for (int dt = 0; dt < kDTiles; ++dt) {
              acc_o[mt][dt][2 * hf] *= correction;
              acc_o[mt][dt][2 * hf + 1] *= correction;
            }
          } else {
            base = row_max[mt][hf] == -INFINITY ? 0.f : row_max[mt][hf];
            sum = row_sum[mt][hf];
          }
        } else {
          base = mx == -INFINITY ? 0.f : mx;
          const float correction = fast_exp2(row_max[mt][hf] - base);
          row_max[mt][hf] = mx;
          sum = row_sum[mt][hf] * correction;
#pragma unroll
          for (int dt = 0; dt < kDTiles; ++dt) {
            acc_o[mt][dt][2 * hf] *= correction;
            acc_o[mt][dt][2 * hf + 1] *= correction;
          }
        }
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          float p0, p1;
          if constexpr (kFusedScale) {
            // One FFMA per score where the base tiles spend an FMUL and an FADD.
            p0 = fast_exp2(fmaf(acc_s[mt][nt][2 * hf], scale_log2, -base));
            p1 = fast_exp2(fmaf(acc_s[mt][nt][2 * hf + 1], scale_log2, -base));
          } else {
            p0 = fast_exp2(acc_s[mt][nt][2 * hf] - base);
            p1 = fast_exp2(acc_s[mt][nt][2 * hf + 1] - base);
          }
          acc_s[mt][nt][2 * hf] = p0;
          acc_s[mt][nt][2 * hf + 1] = p1;
          sum += p0 + p1;
        }
        row_sum[mt][hf] = sum;
      }

    // O += P V: the score accumulators of two n8 tiles are the A operand of one k16 step.
    // Packing all of P first frees the float scores before the second product (at D = 128
    // that is 32 registers, the difference between spilling and not).
    uint32_t p_frag[kBlockN / 16][kMTiles][4];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        p_frag[kk][mt][0] = pack2<T>(acc_s[mt][2 * kk][0], acc_s[mt][2 * kk][1]);
        p_frag[kk][mt][1] = pack2<T>(acc_s[mt][2 * kk][2], acc_s[mt][2 * kk][3]);
        p_frag[kk][mt][2] = pack2<T>(acc_s[mt][2 * kk + 1][0], acc_s[mt][2 * kk + 1][1]);
        p_frag[kk][mt][3] = pack2<T>(acc_s[mt][2 * kk + 1][2], acc_s[mt][2 * kk + 1][3]);
      }
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t(&a)[kMTiles][4] = p_frag[kk];
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, v_addr + Sw::at(v_lane, dp * 2) + kk * 16 * kRowBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(acc_o[mt][2 * dp], a[mt], bv[0], bv[1]);
          mma_16816<T>(acc_o[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may still be in flight when the block exits

  // Epilogue: divide by the row sums once, write the output and the logsumexp (or, when the
  // keys are split, float32 partial results for the combine kernel).
  const bool split_mode = args.o_accum != nullptr;
  if constexpr (Tl::kStageO) {
    if (!split_mode) {
      // Through shared memory: each warp writes its own rows of the query tile's buffer (no
      // other warp reads them), then stores whole 16-byte chunks, a row's chunks from adjacent
      // lanes, where the register layout gives 4-byte pieces of 8 rows per instruction. The
      // barrier covers other threads' cp.async of the query tile, still in flight when the
      // block had no key tile (the loop's barriers cover it otherwise); uniform, as split_mode.
      __syncthreads();
      T* const s_o = s_q;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float sum = row_sum[mt][hf];
          sum += __shfl_xor_sync(0xffffffffu, sum, 1);
          sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          const int r = warp_row0 + mt * 16 + g + hf * 8;
          const float inv = sum > 0.f ? 1.f / sum : 0.f;
          if (m0 + r < seqlen_q && t == 0) {
            p.lse[lse_offset(p, b, h) + m0 + r] =
                sum > 0.f ? (row_max[mt][hf] + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
          }
#pragma unroll
          for (int dt = 0; dt < kDTiles; ++dt) {
            *reinterpret_cast<uint32_t*>(s_o + smem_offset<kHeadDim>(r, dt) + 2 * t) =
                pack2<T>(acc_o[mt][dt][2 * hf] * inv, acc_o[mt][dt][2 * hf + 1] * inv);
          }
        }
      __syncwarp();
      constexpr int kChunks = kHeadDim / 8;
      constexpr int kWarpChunks = kMTiles * 16 * kChunks;
      static_assert(kWarpChunks % 32 == 0, "whole passes of the warp");
      T* const out = static_cast<T*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride;
#pragma unroll
      for (int idx = lane; idx < kWarpChunks; idx += 32) {
        const int r = warp_row0 + idx / kChunks;
        const int c = idx % kChunks;
        // D % 8 == 0 and 16-byte aligned rows (the plan's condition): a chunk is wholly in or out.
        if (m0 + r < seqlen_q && c * 8 < dim) {
          *reinterpret_cast<uint4*>(out + (q_row0 + m0 + r) * p.out_seq_stride + c * 8) =
              *reinterpret_cast<const uint4*>(s_o + smem_offset<kHeadDim>(r, c));
        }
      }
      return;
    }
  }
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = row_sum[mt][hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = m0 + warp_row0 + mt * 16 + g + hf * 8;
      if (row >= seqlen_q) continue;
      // A row that saw no key: output 0 and the log of an empty sum.
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const float lse = sum > 0.f ? (row_max[mt][hf] + __log2f(sum)) * 0.6931471805599453f
                                  : -INFINITY;
      if (split_mode) {
        const int64_t acc_row = (split * p.heads_q + h) * args.accum_rows + b * p.seqlen_q + row;
        float* o = args.o_accum + acc_row * dim;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          const int col = dt * 8 + 2 * t;
          if (col < dim) {
            *reinterpret_cast<float2*>(o + col) =
                make_float2(acc_o[mt][dt][2 * hf] * inv, acc_o[mt][dt][2 * hf + 1] * inv);
          }
        }
        if (t == 0) args.lse_accum[acc_row] = lse;
      } else {
        T* o = static_cast<T*>(p.out) + b * p.out_batch_stride +
               (q_row0 + row) * p.out_seq_stride + h * p.out_head_stride;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          const int col = dt * 8 + 2 * t;
          // D % 8 == 0: a pair is wholly in or out, and 4-byte aligned.
          if (col < dim) {
            *reinterpret_cast<uint32_t*>(o + col) =
                pack2<T>(acc_o[mt][dt][2 * hf] * inv, acc_o[mt][dt][2 * hf + 1] * inv);
          }
        }
        if (t == 0) p.lse[lse_offset(p, b, h) + row] = lse;
      }
    }
}

// Opts the kernel into its shared memory on `device` once (a kernel needs that above 48 KiB, per
// device) and returns its static facts for that device.
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures>
FwdShape fwd_shape(int device) {
  using Tl = Tile<kHeadDim, kSmallM, kCfg>;
  constexpr int kThreads = Tl::kThreads;
  constexpr int kMaxDevices = 64;
  // 0 = not yet prepared; otherwise resident blocks per SM. Racing threads do the same
  // idempotent work and store the same value.
  static std::atomic<int> blocks_per_sm[kMaxDevices];
  auto kernel = flash_fwd_kernel<T, kHeadDim, kBias, kSmallM, kCfg, kFeatures>;
  int blocks = device >= 0 && device < kMaxDevices ? blocks_per_sm[device].load() : 0;
  if (blocks == 0) {
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Tl::kSmemBytes));
    DJL_ATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads,
                                                                      Tl::kSmemBytes));
    if (blocks < 1) {
      fail_native("flash_fwd_kernel<", kHeadDim, ">: does not fit on device ", device, " (",
                  Tl::kSmemBytes, " bytes of shared memory, ", kThreads, " threads)");
    }
    if (device >= 0 && device < kMaxDevices) blocks_per_sm[device].store(blocks);
  }
  return FwdShape{Tl::kBlockM, Tl::kBlockN, Tl::kSmemBytes, blocks};
}

// Launches one (dtype, head dim) instantiation; fwd_shape(device) has run before.
template <typename T, int kHeadDim, bool kBias, bool kSmallM, int kCfg, bool kFeatures>
void launch_fwd(const FwdArgs& args, cudaStream_t stream) {
  using Tl = Tile<kHeadDim, kSmallM, kCfg>;
  const dim3 grid(static_cast<unsigned>(args.m_blocks * args.params.batch * args.params.heads_q),
                  static_cast<unsigned>(args.num_splits));
  flash_fwd_kernel<T, kHeadDim, kBias, kSmallM, kCfg, kFeatures>
      <<<grid, Tl::kThreads, Tl::kSmemBytes, stream>>>(args);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_fwd_kernel");
}

}  // namespace djl_attn::flash::fwd

// The instantiations of one (dtype, head dim), for the flash_fwd_hdim*.cu files.
#define DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, BIAS, SMALL_M, CFG, FEATURES)              \
  template void djl_attn::flash::fwd::launch_fwd<T, HEAD_DIM, BIAS, SMALL_M, CFG, FEATURES>(   \
      const djl_attn::flash::fwd::FwdArgs&, cudaStream_t);                                     \
  template djl_attn::flash::fwd::FwdShape                                                      \
  djl_attn::flash::fwd::fwd_shape<T, HEAD_DIM, BIAS, SMALL_M, CFG, FEATURES>(int);
#define DJL_FLASH_INSTANTIATE_FWD(T, HEAD_DIM)                        \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, false, false, 0, false) \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, false, true, 0, false)  \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, true, false, 0, false)  \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, true, true, 0, false)
// The sliding window, soft-capping and ALiBi (flash_fwd_hdim*_features.cu): base tiles, no bias.
#define DJL_FLASH_INSTANTIATE_FWD_FEATURES(T, HEAD_DIM)              \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, false, false, 0, true) \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, false, true, 0, true)
// One tuning configuration (flash_fwd_hdim*_cfg*.cu): no bias, 128-row-class problems only.
#define DJL_FLASH_INSTANTIATE_FWD_CFG(T, HEAD_DIM, CFG) \
  DJL_FLASH_INSTANTIATE_FWD_ONE_(T, HEAD_DIM, false, false, CFG, false)
