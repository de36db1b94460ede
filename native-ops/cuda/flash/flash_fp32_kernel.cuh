// The float32 flash attention forward on tensor cores: FlashAttention-2's tiling with both
// products on mma.sync m16n8k8 tf32, split into hi + lo parts for float32 accuracy (3xTF32, see
// flash_fp32.h) unless the caller opted into plain tf32.
//
// One thread block computes one query tile (16 rows per warp) of one (batch, head). The query
// tile is copied to shared memory once, multiplied there by scale * log2(e) (and given its bias),
// so that scores come out in the exponent's base-2 domain. Key/value tiles stream through a
// cp.async ring of kFp32Stages buffers. Each warp owns whole rows: softmax statistics and the
// output accumulator of a row live in one warp's registers.
//
// Operand layouts. tf32 fragments of m16n8k8 (g = lane / 4, t = lane % 4):
//   A (16 x 8):  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B (8 x 8):   b0 (k t, n g), b1 (k t + 4, n g)
//   C (16 x 8):  c0, c1 (g, 2t and 2t + 1), c2, c3 (g + 8, 2t and 2t + 1)
// A product's k index may be permuted freely as long as A and B use the same permutation; the
// kernel uses that twice so that every shared-memory read is one 128-bit load:
//   S = Q K^T: in k16 block j of the head dim, logical k t / t + 4 of step s (0, 1) is head-dim
//     column 16j + 4t + 2s / + 1. A lane then reads Q[g][16j + 4t .. + 3] (and row g + 8) and
//     K[key g][16j + 4t .. + 3] once for both k8 steps.
//   O = P V: logical k t / t + 4 of key block kt is key 8kt + 2t / 2t + 1, which is exactly where
//     S's accumulator left those probabilities (c0 / c1), so P needs no shuffle. The output
//     columns are permuted too: in each group of 32, logical column c of n8 tile m is head-dim
//     column 4c + m, so that a lane's b0 of tiles m = 0..3 of group dg is V[key][32dg + 4g .. + 3],
//     one load; its accumulators then hold head-dim columns 32dg + 8t .. + 7, two float4 stores.
//
// Included only by the instantiation files (flash_fp32_hdim*.cu).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "common/error.h"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/mma.cuh"
#include "cuda/flash/flash_fp32.h"
#include "cuda/flash/flash_fp32_launch.h"
#include "flash/flash_params.h"

namespace djl_attn::flash::fp32 {

template <int kHeadDim, int kWarps>
struct Shape {
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head dim: groups of 32 output columns");
  static_assert(fp32_smem_bytes(kHeadDim, kWarps) <= 227 * 1024, "fits in an sm_90 block");
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = fp32_block_n(kHeadDim);
  static constexpr int kQkPitch = fp32_qk_pitch(kHeadDim);
  static constexpr int kVPitch = fp32_v_pitch(kHeadDim);
  static constexpr int kQFloats = kBlockM * kQkPitch;
  static constexpr int kKFloats = kBlockN * kQkPitch;
  static constexpr int kVFloats = kBlockN * kVPitch;
  static constexpr int kSmemBytes = static_cast<int>(fp32_smem_bytes(kHeadDim, kWarps));
  static_assert(kSmemBytes == 4 * (kQFloats + kFp32Stages * (kKFloats + kVFloats)), "layout");
  static constexpr int kNTiles = kBlockN / 8;    // n8 score tiles = k8 steps of O += P V
  static constexpr int kDGroups = kHeadDim / 32;  // groups of four n8 output tiles
};

// ---- PTX ---------------------------------------------------------------------------------------

using cuda::ptx::fast_exp2;
using cuda::ptx::smem_addr;

// cp.async without the "memory" clobber (cuda/common/cp_async.cuh, `unordered`): every
// shared-memory read of copied data here follows a wait and a __syncthreads, and without the
// clobber ptxas keeps the schedule that the float32 benchmarks measured.
using cuda::ptx::unordered::cp_async_4;
using cuda::ptx::unordered::cp_async_16;
using cuda::ptx::unordered::cp_async_commit;
using cuda::ptx::unordered::cp_async_wait;

// d += a b on tf32 operands (float32 bit patterns whose low 13 mantissa bits the tensor core
// ignores), float32 accumulation.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x rounded to tf32: to nearest, ties away from zero (add half of tf32's last place, then clear
// the 13 bits below it). Two integer operations, where cvt.rna.tf32.f32 is several.
__device__ __forceinline__ uint32_t round_tf32(float x) {
  return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

// An operand as tf32 parts: hi = tf32(x), lo = tf32(x - hi) (x - hi is exact in float32 and
// |x - hi| <= 2^-11 |x|). Rounding lo too, rather than letting the tensor core drop its low bits,
// halves the bound on its error (2^-22 |x| instead of 2^-21) for two integer operations.
struct Split {
  uint32_t hi, lo;
};
__device__ __forceinline__ Split split_tf32(float x) {
  const uint32_t hi = round_tf32(x);
  return Split{hi, round_tf32(x - __uint_as_float(hi))};
}

// One m16n8k8 product: three mma for kSplit (small terms first, so that they are not rounded
// against the large one before being added), one otherwise (lo parts unused).
template <bool kSplit>
__device__ __forceinline__ void mma_product(float (&d)[4], const uint32_t (&a_hi)[4],
                                            const uint32_t (&a_lo)[4], const Split& b0,
                                            const Split& b1) {
  if constexpr (kSplit) {
    mma_tf32(d, a_lo, b0.hi, b1.hi);
    mma_tf32(d, a_hi, b0.lo, b1.lo);
  }
  mma_tf32(d, a_hi, b0.hi, b1.hi);
}

template <bool kSplit>
__device__ __forceinline__ Split operand(float x) {
  if constexpr (kSplit) {
    return split_tf32(x);
  } else {
    return Split{round_tf32(x), 0u};
  }
}

// A fragment from four floats in a0..a3 order.
template <bool kSplit>
__device__ __forceinline__ void a_fragment(uint32_t (&hi)[4], uint32_t (&lo)[4], float a0,
                                           float a1, float a2, float a3) {
  const float a[4] = {a0, a1, a2, a3};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const Split s = operand<kSplit>(a[i]);
    hi[i] = s.hi;
    lo[i] = s.lo;
  }
}

// ---- global -> shared tiles --------------------------------------------------------------------

// Copies rows [0, kRows) of a tile whose row r starts at `src + r * row_stride` into rows of
// kPitch floats; rows at or past `valid_rows` and columns at or past `dim` become zeros (zero
// keys score 0 and are masked; zero values times a probability of 0 stay 0, where stale shared
// memory could hold NaN). `vectorized`: D % 4 == 0 and 16-byte aligned rows, so a 16-byte chunk
// is wholly in or out; otherwise every float is its own 4-byte copy.
template <int kHeadDim, int kRows, int kPitch, int kThreads>
__device__ __forceinline__ void load_tile(float* tile, const float* src, int64_t row_stride,
                                          int valid_rows, int dim, bool vectorized) {
  if (vectorized) {
    constexpr int kChunks = kHeadDim / 4;
    constexpr int kTotal = kRows * kChunks;
#pragma unroll
    for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
      const int idx = it * kThreads + static_cast<int>(threadIdx.x);
      if (kTotal % kThreads != 0 && idx >= kTotal) break;
      const int r = idx / kChunks;
      const int c = (idx % kChunks) * 4;
      const bool ok = r < valid_rows && c < dim;
      cp_async_16(smem_addr(tile + r * kPitch + c), ok ? src + r * row_stride + c : src,
                  ok ? 16 : 0);
    }
  } else {
    constexpr int kTotal = kRows * kHeadDim;
    for (int idx = static_cast<int>(threadIdx.x); idx < kTotal; idx += kThreads) {
      const int r = idx / kHeadDim;
      const int c = idx % kHeadDim;
      const bool ok = r < valid_rows && c < dim;
      cp_async_4(smem_addr(tile + r * kPitch + c), ok ? src + r * row_stride + c : src,
                 ok ? 4 : 0);
    }
  }
}

// Adds bias[d] (d < dim) to rows [0, valid_rows) of a resident tile and multiplies every element
// by `factor`. The caller synchronises before and after.
template <int kHeadDim, int kRows, int kPitch, int kThreads>
__device__ __forceinline__ void transform_tile(float* tile, const float* bias, float factor,
                                               int valid_rows, int dim) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kRows * kHeadDim; idx += kThreads) {
    const int r = idx / kHeadDim;
    const int c = idx % kHeadDim;
    float x = tile[r * kPitch + c];
    if (bias != nullptr && r < valid_rows && c < dim) x += bias[c];
    tile[r * kPitch + c] = x * factor;
  }
}

// ---- the kernel --------------------------------------------------------------------------------

// kSplit: 3xTF32 (float32 accuracy) or 1xTF32. kBias: the q/k/v bias passes (a template flag:
// the per-tile passes and their barriers cost time and registers where no bias is given).
// kFeatures: the sliding window, soft-capping and ALiBi (FlashParams), in 4-warp 3xTF32 tiles
// without bias only. A template flag as well: as a run-time branch in the plain kernels it
// moved ptxas's allocation of the default path (sm_90, D = 256, 4 warps: 0 -> 24 bytes spilled).
template <int kHeadDim, int kWarps, bool kSplit, bool kBias, bool kFeatures>
__global__ void __launch_bounds__(32 * kWarps, 1)
    flash_fp32_kernel(const FlashParams p, const int m_blocks, const bool vectorized) {
  using Sh = Shape<kHeadDim, kWarps>;
  constexpr int kBlockM = Sh::kBlockM, kBlockN = Sh::kBlockN, kThreads = Sh::kThreads;
  constexpr int kQkPitch = Sh::kQkPitch, kVPitch = Sh::kVPitch;
  constexpr int kNTiles = Sh::kNTiles, kDGroups = Sh::kDGroups;
  static_assert(!kFeatures || (kWarps == 4 && kSplit && !kBias), "features: 4w 3xTF32 tiles");

  extern __shared__ float4 smem_raw[];
  float* const s_q = reinterpret_cast<float*>(smem_raw);
  float* const s_k = s_q + Sh::kQFloats;
  float* const s_v = s_k + kFp32Stages * Sh::kKFloats;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  // m blocks vary fastest, so consecutive blocks read the same keys and values from L2; they
  // run last tile first: under a causal mask the last query tiles see the most keys, and
  // starting the longest work first keeps the final wave short.
  const int m_block = m_blocks - 1 - static_cast<int>(blockIdx.x % m_blocks);
  const int64_t bh = blockIdx.x / m_blocks;
  const int64_t b = bh / p.heads_q;
  const int64_t h = bh % p.heads_q;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);

  const SeqExtent<int> seq(p, b);  // flash_params.h
  const int64_t q_row0 = seq.q_row0, k_row0 = seq.k_row0;
  const int seqlen_q = seq.seqlen_q;
  const int m0 = m_block * kBlockM;
  if (m0 >= seqlen_q) return;  // a shorter sequence of a varlen batch: the whole block leaves
  int kv_len = seq.kv_len(p, b);
  const int dim = static_cast<int>(p.head_dim);
  // Query row i sees key j iff j <= i + diagonal (bottom-right aligned).
  const int diagonal = kv_len - seqlen_q;
  // Key tiles this block needs: every valid key, cut at the causal limit of its last row, so
  // that tiles wholly above the diagonal are never loaded.
  // With a sliding window the range is cut at the window's edges too (flash_params.h,
  // visible_keys): tiles wholly outside it are skipped, not masked.
  int key_end = kv_len;
  if (p.causal) key_end = min(max(min(m0 + kBlockM, seqlen_q) + diagonal, 0), kv_len);
  int n_first = 0;
  if constexpr (kFeatures) {
    const KeyRange keys =
        visible_keys(p, diagonal, kv_len, m0, min(m0 + kBlockM, seqlen_q) - 1);
    n_first = static_cast<int>(keys.begin) / kBlockN;
    key_end = keys.end > keys.begin ? static_cast<int>(keys.end) : n_first * kBlockN;
  }
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;

  const float* q = static_cast<const float*>(p.q) + b * p.q_batch_stride +
                   (q_row0 + m0) * p.q_seq_stride + h * p.q_head_stride;
  const float* k = static_cast<const float*>(p.k) + b * p.k_batch_stride +
                   k_row0 * p.k_seq_stride + h_kv * p.k_head_stride;
  const float* v = static_cast<const float*>(p.v) + b * p.v_batch_stride +
                   k_row0 * p.v_seq_stride + h_kv * p.v_head_stride;

  auto load_kv = [&](int n, int stage) {
    const int n0 = n * kBlockN;
    load_tile<kHeadDim, kBlockN, kQkPitch, kThreads>(s_k + stage * Sh::kKFloats,
                                                     k + n0 * p.k_seq_stride, p.k_seq_stride,
                                                     kv_len - n0, dim, vectorized);
    load_tile<kHeadDim, kBlockN, kVPitch, kThreads>(s_v + stage * Sh::kVFloats,
                                                    v + n0 * p.v_seq_stride, p.v_seq_stride,
                                                    kv_len - n0, dim, vectorized);
  };

  // Prologue: the query tile, then the first key/value tile, one commit group each.
  load_tile<kHeadDim, kBlockM, kQkPitch, kThreads>(s_q, q, p.q_seq_stride, seqlen_q - m0, dim,
                                                   vectorized);
  cp_async_commit();
  // Tile n lives in stage n % kFp32Stages, whatever tile the loop starts at.
  if (n_first < n_blocks) load_kv(n_first, n_first % kFp32Stages);
  cp_async_commit();
  // The query tile is resident once all but the key/value group have landed; scale it (and add
  // its bias) in place. The loop's first barrier orders these writes before the first product.
  constexpr float kLog2e = 1.4426950408889634f;
  cp_async_wait<1>();
  __syncthreads();
  transform_tile<kHeadDim, kBlockM, kQkPitch, kThreads>(
      s_q, kBias && p.q_bias != nullptr ? static_cast<const float*>(p.q_bias) + h * dim : nullptr,
      p.scale * kLog2e, seqlen_q - m0, dim);

  float acc_o[kDGroups * 4][4];
#pragma unroll
  for (int i = 0; i < kDGroups * 4; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[i][e] = 0.f;
  // Rows g and g + 8 of the warp's 16. The running maximum is of base-2 scores; the sum is this
  // thread's partial sum over its columns, reduced across the quad once at the end.
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  const int warp_row0 = warp * 16;
  const bool warp_active = m0 + warp_row0 < seqlen_q;

  for (int n = n_first; n < n_blocks; ++n) {
    const int stage = n % kFp32Stages;
    cp_async_wait<0>();
    // Tile n is resident for every thread, and every warp is done with tile n - 1, whose buffer
    // the prefetch below overwrites.
    __syncthreads();
    if (n + 1 < n_blocks) load_kv(n + 1, (n + 1) % kFp32Stages);
    cp_async_commit();
    float* const k_tile = s_k + stage * Sh::kKFloats;
    float* const v_tile = s_v + stage * Sh::kVFloats;
    const int n0 = n * kBlockN;
    if constexpr (kBias) {
      if (p.k_bias != nullptr) {
        transform_tile<kHeadDim, kBlockN, kQkPitch, kThreads>(
            k_tile, static_cast<const float*>(p.k_bias) + h_kv * dim, 1.f, kv_len - n0, dim);
      }
      if (p.v_bias != nullptr) {
        transform_tile<kHeadDim, kBlockN, kVPitch, kThreads>(
            v_tile, static_cast<const float*>(p.v_bias) + h_kv * dim, 1.f, kv_len - n0, dim);
      }
      __syncthreads();
    }

    // A warp whose rows all lie past the end of the queries (decode, short sequences) only
    // helps with the copies and barriers.
    if (!warp_active) continue;

    // S = Q K^T (base-2 scores) for the warp's 16 rows and the tile's keys.
    float acc_s[kNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.f;
    const float* q_lane = s_q + (warp_row0 + g) * kQkPitch + 4 * t;
    const float* k_lane = k_tile + g * kQkPitch + 4 * t;
#pragma unroll
    for (int kb = 0; kb < kHeadDim / 16; ++kb) {
      const float4 qa = *reinterpret_cast<const float4*>(q_lane + kb * 16);
      const float4 qb = *reinterpret_cast<const float4*>(q_lane + 8 * kQkPitch + kb * 16);
      uint32_t a0_hi[4], a0_lo[4], a1_hi[4], a1_lo[4];
      a_fragment<kSplit>(a0_hi, a0_lo, qa.x, qb.x, qa.y, qb.y);
      a_fragment<kSplit>(a1_hi, a1_lo, qa.z, qb.z, qa.w, qb.w);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const float4 kf = *reinterpret_cast<const float4*>(k_lane + nt * 8 * kQkPitch + kb * 16);
        mma_product<kSplit>(acc_s[nt], a0_hi, a0_lo, operand<kSplit>(kf.x), operand<kSplit>(kf.y));
        mma_product<kSplit>(acc_s[nt], a1_hi, a1_lo, operand<kSplit>(kf.z), operand<kSplit>(kf.w));
      }
    }

    // Mask where the tile crosses the end of the valid keys or the causal diagonal (interior
    // tiles skip the per-element test).
    const bool need_mask =
        n0 + kBlockN > kv_len || (p.causal && n0 + kBlockN - 1 > m0 + diagonal);
    if constexpr (kFeatures) {
      // The sliding window's mask, soft-capping and ALiBi on every score. The scores are in
      // the log2 domain (the query tile carries scale * log2(e)); the features work in the
      // natural one.
      const float slope = alibi_slope(p, b, h);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n0 + nt * 8 + 2 * t + (e & 1);
          const int d = m0 + warp_row0 + g + (e >= 2 ? 8 : 0) + diagonal - col;
          acc_s[nt][e] = col >= kv_len || !offset_visible(p, d)
                             ? -INFINITY
                             : modify_score(acc_s[nt][e] * 0.6931471805599453f, p.softcap,
                                            slope, static_cast<float>(abs(d))) *
                                   kLog2e;
        }
    } else if (need_mask) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + warp_row0 + g + (e >= 2 ? 8 : 0);
          const int col = n0 + nt * 8 + 2 * t + (e & 1);
          if (col >= kv_len || (p.causal && col > row + diagonal)) acc_s[nt][e] = -INFINITY;
        }
    }

    // Online softmax: new row maxima, the factor that rebases what was accumulated, exponentials.
    float correction[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float mx = row_max[hf];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        mx = fmaxf(mx, fmaxf(acc_s[nt][2 * hf], acc_s[nt][2 * hf + 1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with nothing visible yet keeps max -inf; subtracting 0 instead keeps
      // exp2(-inf - max) at 0 rather than NaN.
      const float base = mx == -INFINITY ? 0.f : mx;
      correction[hf] = fast_exp2(row_max[hf] - base);
      row_max[hf] = mx;
      float sum = row_sum[hf] * correction[hf];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const float p0 = fast_exp2(acc_s[nt][2 * hf] - base);
        const float p1 = fast_exp2(acc_s[nt][2 * hf + 1] - base);
        acc_s[nt][2 * hf] = p0;
        acc_s[nt][2 * hf + 1] = p1;
        sum += p0 + p1;
      }
      row_sum[hf] = sum;
    }

    // O = O * correction + P V. Score tile kt holds, per lane, P[g][8kt + 2t], P[g][8kt + 2t + 1]
    // (c0, c1) and the same of row g + 8 (c2, c3), which are a0, a2, a1, a3 of key block kt (see
    // the top). The tensor core sums the tile's key blocks in a fresh accumulator per group of
    // output columns, which is then added to O in one float32 FFMA with the rescale. Chaining
    // every key block of a row through the tensor core's own float32 accumulation, which rounds
    // less carefully than an FFMA, cost accuracy: measured on an H200 at
    // [2, 4096, 4096, 16, 16, 128], 8.8e-6 that way, 8.1e-7 this way (stock float32: 5.5e-7).
    // Accumulators per group of 32 columns (16 registers) rather than per tile (64 at D = 128)
    // keep the 3xTF32 kernels at D = 128 within 255 registers (ptxas: no spill with 4 warps, 16
    // bytes with 8).
    const float* v_lane = v_tile + 2 * t * kVPitch + 4 * g;
#pragma unroll
    for (int dg = 0; dg < kDGroups; ++dg) {
      float part[4][4];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[m][e] = 0.f;
#pragma unroll
      for (int kt = 0; kt < kNTiles; ++kt) {
        uint32_t a_hi[4], a_lo[4];
        a_fragment<kSplit>(a_hi, a_lo, acc_s[kt][0], acc_s[kt][2], acc_s[kt][1], acc_s[kt][3]);
        const float* v_row = v_lane + kt * 8 * kVPitch + dg * 32;
        const float4 v0 = *reinterpret_cast<const float4*>(v_row);
        const float4 v1 = *reinterpret_cast<const float4*>(v_row + kVPitch);
        mma_product<kSplit>(part[0], a_hi, a_lo, operand<kSplit>(v0.x), operand<kSplit>(v1.x));
        mma_product<kSplit>(part[1], a_hi, a_lo, operand<kSplit>(v0.y), operand<kSplit>(v1.y));
        mma_product<kSplit>(part[2], a_hi, a_lo, operand<kSplit>(v0.z), operand<kSplit>(v1.z));
        mma_product<kSplit>(part[3], a_hi, a_lo, operand<kSplit>(v0.w), operand<kSplit>(v1.w));
      }
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc_o[4 * dg + m][e] = fmaf(acc_o[4 * dg + m][e], correction[e / 2], part[m][e]);
        }
    }
  }
  cp_async_wait<0>();  // no copy may still be in flight when the block exits

  // Epilogue: divide by the row sums once, write the output and the logsumexp. Lane (g, t)
  // holds head-dim columns 32dg + 8t + j of rows g and g + 8: j < 4 in acc_o[4dg + j][0 | 2],
  // j >= 4 in acc_o[4dg + j - 4][1 | 3].
  float* const out_head =
      static_cast<float*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = row_sum[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = m0 + warp_row0 + g + hf * 8;
    if (row >= seqlen_q) continue;
    // A row that saw no key: output 0 and the log of an empty sum.
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    float* const o = out_head + (q_row0 + row) * p.out_seq_stride;
#pragma unroll
    for (int dg = 0; dg < kDGroups; ++dg) {
      const int col = dg * 32 + 8 * t;
      const float4 lo4 = make_float4(acc_o[4 * dg][2 * hf] * inv, acc_o[4 * dg + 1][2 * hf] * inv,
                                     acc_o[4 * dg + 2][2 * hf] * inv,
                                     acc_o[4 * dg + 3][2 * hf] * inv);
      const float4 hi4 = make_float4(
          acc_o[4 * dg][2 * hf + 1] * inv, acc_o[4 * dg + 1][2 * hf + 1] * inv,
          acc_o[4 * dg + 2][2 * hf + 1] * inv, acc_o[4 * dg + 3][2 * hf + 1] * inv);
      if (vectorized) {
        // D % 4 == 0: a 4-column chunk is wholly in or out.
        if (col < dim) *reinterpret_cast<float4*>(o + col) = lo4;
        if (col + 4 < dim) *reinterpret_cast<float4*>(o + col + 4) = hi4;
      } else {
        const float vals[8] = {lo4.x, lo4.y, lo4.z, lo4.w, hi4.x, hi4.y, hi4.z, hi4.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (col + j < dim) o[col + j] = vals[j];
        }
      }
    }
    if (t == 0) {
      p.lse[lse_offset(p, b, h) + row] =
          sum > 0.f ? (row_max[hf] + log2f(sum)) * 0.6931471805599453f : -INFINITY;
    }
  }
}

// Launches one instantiation, opting it into its shared memory on the current device first (a
// kernel needs that above 48 KiB, once per device).
template <int kHeadDim, int kWarps, bool kSplit, bool kBias, bool kFeatures>
void launch_flash_fp32_tile(const FlashParams& p, bool vectorized, cudaStream_t stream) {
  using Sh = Shape<kHeadDim, kWarps>;
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> prepared[kMaxDevices];
  int device = 0;
  DJL_ATTN_CUDA_CHECK(cudaGetDevice(&device));
  auto kernel = flash_fp32_kernel<kHeadDim, kWarps, kSplit, kBias, kFeatures>;
  if (device < 0 || device >= kMaxDevices || !prepared[device].load()) {
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Sh::kSmemBytes));
    if (device >= 0 && device < kMaxDevices) prepared[device].store(true);
  }
  const int64_t m_blocks = (p.seqlen_q + Sh::kBlockM - 1) / Sh::kBlockM;
  // Within the grid limit: the bindings hold B * Hq * ceil(Sq / 64) to it (check_query_tiles),
  // and kBlockM >= 64.
  const int64_t blocks = m_blocks * p.batch * p.heads_q;
  if (blocks == 0) return;
  kernel<<<static_cast<unsigned>(blocks), Sh::kThreads, Sh::kSmemBytes, stream>>>(
      p, static_cast<int>(m_blocks), vectorized);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_fp32_kernel");
}

}  // namespace djl_attn::flash::fp32

// The tiles of one head dim that this build lists (DJL_FLASH_FP32_TILES_<D>, flash_fp32.h).
#define DJL_FLASH_FP32_INSTANTIATE_TILE_(D, W, SPLIT, BIAS, FEATURES)                   \
  template void djl_attn::flash::fp32::launch_flash_fp32_tile<D, W, SPLIT, BIAS, FEATURES>( \
      const djl_attn::flash::FlashParams&, bool, cudaStream_t);
#define DJL_FLASH_FP32_INSTANTIATE(HEAD_DIM) \
  DJL_FLASH_FP32_TILES_##HEAD_DIM(DJL_FLASH_FP32_INSTANTIATE_TILE_)
