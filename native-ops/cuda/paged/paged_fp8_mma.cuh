// The tensor-core decode kernel for fp8 (e4m3fn) caches: paged_attention's "flash" kernel where
// the cache is fp8 (the flash family's decode kernel reads float16/bfloat16 rows only).
//
// Why a kernel of its own: v1/v2 compute on CUDA cores, and with fp8 every 16-byte load brings 16
// values, each worth 2 x (Hq / Hkv) multiply-adds: at Hq / Hkv = 4 and H100 bandwidth that is
// about the float32 FMA peak, so they cannot stream an fp8 cache at the memory's speed. Here
// the multiply-adds go to mma.sync m16n8k16 and the CUDA cores only convert (cvt e4m3x2 -> f16x2
// on sm_89+, emulated by cuda_fp8.h on sm_80).
//
// Layout, after flash_decode_kernel.cuh: one thread block of 4 warps per (sequence, kv head[,
// partition]); the group's Hq / Hkv <= 16 query heads are the rows of one m16 tile, held as A
// fragments for the whole loop. Key/value tiles of 64 rows: warp w streams rows [16w, 16w + 16)
// of every tile through its own cp.async ring of fp8 bytes (rows padded by 16 bytes so that the
// fragment reads below hit 32 different banks), so the loop synchronises with __syncwarp only.
// Fragments are read from the fp8 bytes with 32-bit loads and converted in registers:
//   - S = Q K^T sums over the head dim, so the head dim may be visited in any order that Q and K
//     share: for k-step kk, the mma's k indices 2t, 2t+1 (t = lane % 4) are dims kk*16 + 4t,
//     4t + 1 and k indices 2t + 8, 2t + 9 are dims 4t + 2, 4t + 3. A lane's 4 K bytes of one
//     key are then one 32-bit word (b0 its low pair, b1 its high pair), and its Q operand 4
//     consecutive elements of a row.
//   - O = P V's B operand pairs two keys at one output dim. A lane reads 4 consecutive dims of
//     keys 2t, 2t + 1, 2t + 8, 2t + 9 (one word each) and byte-permutes them into the pairs of 4
//     n8 tiles: tile (blk, j), column n is output dim 32 blk + 4 n + j. The epilogue stores the
//     accumulators at those dims.
// Scales: k_scale (and the softmax scale, in the log2 domain) multiply the float32 scores,
// v_scale the output; the query is used as it is. Keys past the context are zero-filled on load
// and their scores masked to -inf. With partitions (v2's split of the context), each block
// writes its partition's max, sum and normalised output to v2's workspace and v2's reduce kernel
// combines them (paged_attention_kernel.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/cp_async.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/mma.cuh"
#include "cuda/paged/paged_attention_kernel.cuh"
#include "cuda/paged/paged_fp8.cuh"
#include "cuda/paged/paged_plan.h"
#include "cuda/paged/paged_plan.h"

namespace djl_attn::paged::kernels {

template <int kHeadDim>
struct Fp8MmaTile {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16;                // keys per warp per tile
  static constexpr int kBlockN = kWarps * kWarpRows;  // keys per tile
  // A row's bytes plus 16: row g of a fragment read starts 4 g words (mod 32) further, so the 8
  // rows x 4 lanes of a read land on 32 banks (K: row stride 20, 36 or 68 words for D = 64, 128,
  // 256; V reads rows 2t + c: 8 t words apart).
  static constexpr int kRowBytes = kHeadDim + 16;
  // Ring buffers per warp: 3 tiles ahead in flight (2 for D = 256, whose ring is larger), as the
  // flash decode kernel's ring at half the bytes per element.
  static constexpr int kStages = kHeadDim <= 128 ? 4 : 3;
  static constexpr int kWarpTileBytes = kWarpRows * kRowBytes;
  static constexpr int kRingBytes = 2 * kWarps * kStages * kWarpTileBytes;  // K and V
  // Epilogue (over the ring): per warp its 16 x D float32 output, rows padded by 8 floats, then
  // the max and sum per row.
  static constexpr int kMergeStride = kHeadDim + 8;
  static constexpr int kMergeBytes = kWarps * 16 * kMergeStride * 4 + 2 * kWarps * 16 * 4;
  static_assert(kMergeBytes <= kRingBytes, "the merge buffers reuse the ring");
  static constexpr int kSmemBytes = kRingBytes;
  static_assert(kSmemBytes == fp8_mma_smem_bytes(kHeadDim), "the plan's size (paged_plan.h)");
  static constexpr int kChunks = kHeadDim / 16;  // 16-byte chunks per row
  static_assert(kHeadDim % 32 == 0 && kChunks <= 32, "head dims 64, 128, 256");
  // 2 blocks per SM: 104 KiB of shared memory each at D = 256, and up to 255 registers.
  static constexpr int kMinBlocks = 2;
};

// Two fp8 bytes of format C (the lower one in the low byte) as one mma operand register of two T
// values.
template <typename T, typename C>
__device__ __forceinline__ uint32_t fp8_pair_operand(uint32_t pair) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), C::kFormat);
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    // Every e4m3 and e5m2 value is exact in bfloat16 (8 exponent bits, 7 mantissa bits).
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    return cuda::ptx::pack2<T>(f.x, f.y);
  }
}

// The cache's block size is a run-time value (one kernel per head dim serves every block size of
// the list): it only places a row (its block's id from the table, its row in the block: a
// shift and a mask) and says whether a warp's 16 rows span two blocks (size 8) or one.
constexpr bool fp8_mma_block_size(int block_size) {
  return block_size >= 8 && (block_size & (block_size - 1)) == 0;
}
static_assert([] {
  for (int b : kBlockSizes) {
    if (!fp8_mma_block_size(b)) return false;
  }
  return true;
}(), "a warp's 16 rows span one block, or two of 8");

static_assert(kWindowAlign % Fp8MmaTile<64>::kBlockN == 0 &&
                  kWindowAlign % Fp8MmaTile<256>::kBlockN == 0,
              "a window's aligned start is a tile's start");

// Grid (Hkv, num_seqs, partitions). partition_size 0: the whole context, output to p.out;
// otherwise a multiple of kBlockN, output to `ws`.
template <typename T, typename C, int kHeadDim>
__global__ void __launch_bounds__(Fp8MmaTile<kHeadDim>::kThreads, Fp8MmaTile<kHeadDim>::kMinBlocks)
    paged_fp8_mma_kernel(PagedAttentionParams p, int partition_size, PartitionWorkspace ws) {
  using Tl = Fp8MmaTile<kHeadDim>;
  using cuda::ptx::fast_exp2;
  using cuda::ptx::mma_16816;
  using cuda::ptx::pack2;
  using cuda::ptx::smem_addr;
  constexpr int kStages = Tl::kStages, kBlockN = Tl::kBlockN, kWarps = Tl::kWarps;
  constexpr int kKSteps = kHeadDim / 16;
  constexpr int kDBlocks = kHeadDim / 32;  // V: 4 n8 tiles of 32 output dims each
  constexpr int kChunks = Tl::kChunks;
  constexpr int kRowsPerPass = 32 / kChunks;  // rows one copy instruction of the warp covers

  extern __shared__ __align__(16) uint8_t smem[];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int kv_head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int part = blockIdx.z;
  const int group = static_cast<int>(p.heads_q / p.kv.heads_kv);  // query rows, <= 16
  const int first_head = kv_head * group;
  const int context = p.kv.context_lens[seq];
  const bool partitioned = partition_size > 0;
  // The sliding window, as v1/v2 have it: keys before `first` are hidden, and the tiles (and
  // partitions) count from `first` aligned down to kWindowAlign, a multiple of kBlockN.
  const int first = first_visible(context, p.window_left);
  const int start = window_base(first) + (partitioned ? part * partition_size : 0);
  if (partitioned && start >= context) return;  // the reduce kernel reads only partitions < context
  const int end = partitioned ? min(start + partition_size, context) : context;
  const int n_begin = start / kBlockN;
  const int n_end = (end + kBlockN - 1) / kBlockN;

  const int64_t token_stride = p.kv.heads_kv * kHeadDim;  // bytes between tokens of a cache block
  const uint8_t* k_cache = static_cast<const uint8_t*>(p.kv.key_cache) + kv_head * kHeadDim;
  const uint8_t* v_cache = static_cast<const uint8_t*>(p.kv.value_cache) + kv_head * kHeadDim;
  const int32_t* table = p.kv.block_tables + seq * p.kv.table_stride;
  const int block_shift = __ffs(static_cast<int>(p.kv.block_size)) - 1;  // log2 of the block size
  const int block_mask = (1 << block_shift) - 1;
  const bool two_blocks = p.kv.block_size < 16;  // per warp's 16 rows

  // The query rows g and g + 8 (heads first_head + row; zero past the group) as A fragments,
  // in the dim order above: a[0]/a[1] dims kk*16 + 4t, +1 of rows g / g + 8, a[2]/a[3] dims
  // +2, +3. Element loads: the query view needs no alignment.
  uint32_t q_frag[kKSteps][4];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = g + half * 8;
    const bool live = row < group;
    const uint16_t* q_row = reinterpret_cast<const uint16_t*>(
        static_cast<const T*>(p.query) + seq * p.q_seq_stride +
        (live ? first_head + row : first_head) * p.q_head_stride);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const int d = kk * 16 + 4 * t;
      uint32_t lo = 0, hi = 0;
      if (live) {
        lo = q_row[d] | (static_cast<uint32_t>(q_row[d + 1]) << 16);
        hi = q_row[d + 2] | (static_cast<uint32_t>(q_row[d + 3]) << 16);
      }
      q_frag[kk][half] = lo;
      q_frag[kk][2 + half] = hi;
    }
  }

  // This warp's ring: kStages buffers of its 16 key rows, then as many of value rows.
  uint8_t* const s_k = smem + warp * kStages * Tl::kWarpTileBytes;
  uint8_t* const s_v = smem + (kWarps + warp) * kStages * Tl::kWarpTileBytes;

  // The physical blocks of this warp's 16 rows of tile n: rows 0-7 in `lo`, 8-15 in `hi` (the
  // same block unless the block size is 8). Read only for rows inside the context (whose table
  // entries are valid), one tile ahead of the copies that use them.
  struct BlockIds {
    int lo, hi;
  };
  auto block_ids = [&](int n) {
    BlockIds ids{0, 0};
    const int seg0 = n * kBlockN + warp * 16;
    if (seg0 < end) ids.lo = __ldg(table + (seg0 >> block_shift));
    ids.hi = ids.lo;
    if (two_blocks && seg0 + 8 < end) ids.hi = __ldg(table + ((seg0 + 8) >> block_shift));
    return ids;
  };

  // Copies this warp's 16 rows of tile n into buffer `stage`: lane (r0, c) copies 16-byte chunk
  // c of rows r0, r0 + kRowsPerPass, ...; rows past `end` or before `first` become zeros.
  auto load_kv = [&](int n, int stage, BlockIds ids) {
    const int seg0 = n * kBlockN + warp * 16;
    const int r0 = lane / kChunks, c = lane % kChunks;
    uint8_t* const dk = s_k + stage * Tl::kWarpTileBytes;
    uint8_t* const dv = s_v + stage * Tl::kWarpTileBytes;
#pragma unroll
    for (int it = 0; it < 16 / kRowsPerPass; ++it) {
      const int r = r0 + it * kRowsPerPass;
      const int row = seg0 + r;
      // Keys before the window are not read either (zeros, like those past the end): a
      // probability of 0 times a NaN or Inf left in a stale slot would still be NaN.
      const bool ok = row < end && row >= first;
      const int64_t block = r < 8 ? ids.lo : ids.hi;
      const int64_t offset = ((block << block_shift) + (row & block_mask)) * token_stride + c * 16;
      const uint32_t at = r * Tl::kRowBytes + c * 16;
      cuda::ptx::cp_async_16(smem_addr(dk + at), ok ? k_cache + offset : k_cache, ok ? 16 : 0);
      cuda::ptx::cp_async_16(smem_addr(dv + at), ok ? v_cache + offset : v_cache, ok ? 16 : 0);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s, block_ids(n_begin + s));
    cuda::ptx::cp_async_commit();
  }
  BlockIds next_ids = block_ids(n_begin + kStages - 1);

  float acc_o[kDBlocks][4][4];
#pragma unroll
  for (int blk = 0; blk < kDBlocks; ++blk)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[blk][j][e] = 0.f;
  // Rows g and g + 8: running max of the scores in the log2 domain and this lane's partial sum
  // over its columns (reduced over the quad at the end).
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  const float score_scale = p.scale * scale_of(p.kv.k_scale, kv_head);
  const float scale_log2 = score_scale * 1.4426950408889634f;
  // The soft-cap on the natural-log scores, then into the log2 domain: a uniform branch.
  const float softcap = p.softcap;

  for (int n = n_begin; n < n_end; ++n) {
    const int stage = (n - n_begin) % kStages;
    cuda::ptx::cp_async_wait<kStages - 2>();
    // This warp's copies of tile n are visible to all its lanes, and every lane is done with
    // the buffer of tile n - 1, which the prefetch below overwrites.
    __syncwarp();
    {
      const int next = n + kStages - 1;
      if (next < n_end) {
        load_kv(next, (next - n_begin) % kStages, next_ids);
        next_ids = block_ids(next + 1);
      }
      cuda::ptx::cp_async_commit();
    }
    const uint8_t* const k_tile = s_k + stage * Tl::kWarpTileBytes;
    const uint8_t* const v_tile = s_v + stage * Tl::kWarpTileBytes;

    // S = Q K^T: rows x this warp's 16 keys (two n8 tiles: keys nt * 8 + g of the lane).
    float acc_s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const uint32_t word = *reinterpret_cast<const uint32_t*>(
            k_tile + (nt * 8 + g) * Tl::kRowBytes + kk * 16 + 4 * t);
        mma_16816<T>(acc_s[nt], q_frag[kk], fp8_pair_operand<T, C>(word),
                     fp8_pair_operand<T, C>(word >> 16));
      }
    }

    // Scale into the log2 domain (soft-capped first when asked); mask keys past the end of the
    // context (or partition) and before the window.
    const int key0 = n * kBlockN + warp * 16;
    const bool need_mask = key0 + 16 > end || key0 < first;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float s = acc_s[nt][e] * scale_log2;
        if (softcap > 0.f) {
          s = softcap * tanhf(acc_s[nt][e] * score_scale / softcap) * 1.4426950408889634f;
        }
        const int key = key0 + nt * 8 + 2 * t + (e & 1);
        if (need_mask && (key >= end || key < first)) s = -INFINITY;
        acc_s[nt][e] = s;
      }

    // Online softmax of this warp's keys.
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float mx = fmaxf(fmaxf(acc_s[0][2 * hf], acc_s[0][2 * hf + 1]),
                       fmaxf(acc_s[1][2 * hf], acc_s[1][2 * hf + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, row_max[hf]);
      // Nothing visible yet: keep exp2(-inf - base) at 0 rather than NaN.
      const float base = mx == -INFINITY ? 0.f : mx;
      const float correction = fast_exp2(row_max[hf] - base);
      row_max[hf] = mx;
      float sum = row_sum[hf] * correction;
#pragma unroll
      for (int blk = 0; blk < kDBlocks; ++blk)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc_o[blk][j][2 * hf] *= correction;
          acc_o[blk][j][2 * hf + 1] *= correction;
        }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float p0 = fast_exp2(acc_s[nt][2 * hf] - base);
        const float p1 = fast_exp2(acc_s[nt][2 * hf + 1] - base);
        acc_s[nt][2 * hf] = p0;
        acc_s[nt][2 * hf + 1] = p1;
        sum += p0 + p1;
      }
      row_sum[hf] = sum;
    }

    // O += P V: the two n8 score tiles are the A operand of one k16 step (keys in order).
    uint32_t pa[4];
    pa[0] = pack2<T>(acc_s[0][0], acc_s[0][1]);
    pa[1] = pack2<T>(acc_s[0][2], acc_s[0][3]);
    pa[2] = pack2<T>(acc_s[1][0], acc_s[1][1]);
    pa[3] = pack2<T>(acc_s[1][2], acc_s[1][3]);
#pragma unroll
    for (int blk = 0; blk < kDBlocks; ++blk) {
      // Dims 32 blk + 4g .. + 3 of keys 2t, 2t + 1, 2t + 8, 2t + 9.
      const uint8_t* const col = v_tile + blk * 32 + 4 * g;
      const uint32_t w0 = *reinterpret_cast<const uint32_t*>(col + (2 * t) * Tl::kRowBytes);
      const uint32_t w1 = *reinterpret_cast<const uint32_t*>(col + (2 * t + 1) * Tl::kRowBytes);
      const uint32_t w2 = *reinterpret_cast<const uint32_t*>(col + (2 * t + 8) * Tl::kRowBytes);
      const uint32_t w3 = *reinterpret_cast<const uint32_t*>(col + (2 * t + 9) * Tl::kRowBytes);
      // Byte j of each word, the two keys paired: {dim j of key 2t, of key 2t + 1} for j = 0, 1
      // in lo01, j = 2, 3 in lo23; keys 2t + 8, 2t + 9 in hi01, hi23.
      const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), lo23 = __byte_perm(w0, w1, 0x7362);
      const uint32_t hi01 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
      mma_16816<T>(acc_o[blk][0], pa, fp8_pair_operand<T, C>(lo01), fp8_pair_operand<T, C>(hi01));
      mma_16816<T>(acc_o[blk][1], pa, fp8_pair_operand<T, C>(lo01 >> 16),
                   fp8_pair_operand<T, C>(hi01 >> 16));
      mma_16816<T>(acc_o[blk][2], pa, fp8_pair_operand<T, C>(lo23), fp8_pair_operand<T, C>(hi23));
      mma_16816<T>(acc_o[blk][3], pa, fp8_pair_operand<T, C>(lo23 >> 16),
                   fp8_pair_operand<T, C>(hi23 >> 16));
    }
  }
  cuda::ptx::cp_async_wait<0>();  // nothing in flight into the ring that the merge reuses
  __syncthreads();

  // Merge the warps: per row, M = max_w m_w, L = sum_w l_w 2^(m_w - M),
  // O = sum_w O_w 2^(m_w - M) / L. Accumulator (blk, j, e) of row g (+8 for e >= 2) is output
  // dim 32 blk + 4 (2t + (e & 1)) + j.
  float* const s_o = reinterpret_cast<float*>(smem);
  float* const s_m = s_o + kWarps * 16 * Tl::kMergeStride;
  float* const s_l = s_m + kWarps * 16;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = row_sum[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = g + hf * 8;
    if (t == 0) {
      s_m[warp * 16 + r] = row_max[hf];
      s_l[warp * 16 + r] = sum;
    }
    float* const o_row = s_o + (warp * 16 + r) * Tl::kMergeStride;
#pragma unroll
    for (int blk = 0; blk < kDBlocks; ++blk)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        o_row[blk * 32 + 8 * t + j] = acc_o[blk][j][2 * hf];
        o_row[blk * 32 + 8 * t + 4 + j] = acc_o[blk][j][2 * hf + 1];
      }
  }
  __syncthreads();

  const float out_scale = scale_of(p.kv.v_scale, kv_head);
  T* const out = static_cast<T*>(p.out) + (seq * p.heads_q + first_head) * kHeadDim;
  for (int idx = threadIdx.x; idx < group * kHeadDim; idx += Tl::kThreads) {
    const int r = idx / kHeadDim, d = idx % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_m[w * 16 + r]);
    const float base = m == -INFINITY ? 0.f : m;
    float l = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = fast_exp2(s_m[w * 16 + r] - base);
      l += s_l[w * 16 + r] * f;
      o += s_o[(w * 16 + r) * Tl::kMergeStride + d] * f;
    }
    // A context of 0 (one pass only): no key, output 0.
    o = l > 0.f ? o / l * out_scale : 0.f;
    if (partitioned) {
      // v2's workspace: natural-log max (the scores above are log2-scaled) and the sum under it.
      const int64_t row =
          (seq * p.heads_q + first_head + r) * static_cast<int64_t>(ws.max_partitions) + part;
      ws.out[row * kHeadDim + d] = o;
      if (d == 0) {
        ws.max_logits[row] = m * 0.6931471805599453f;
        ws.exp_sums[row] = l;
      }
    } else {
      out[idx] = from_float<T>(o);
    }
  }
}

template <typename T, typename C, int kHeadDim>
void launch_fp8_mma_head_dim(const PagedAttentionParams& p, const DecodePlan& plan,
                             const PartitionWorkspace& ws, cudaStream_t stream) {
  using Tl = Fp8MmaTile<kHeadDim>;
  auto* kernel = paged_fp8_mma_kernel<T, C, kHeadDim>;
  if constexpr (Tl::kSmemBytes > 48 * 1024) {
    // Past 48 KiB a kernel must opt in; the attribute is per device, so set it on every call
    // (a host-side attribute write, no synchronisation).
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Tl::kSmemBytes));
  }
  const dim3 grid(static_cast<unsigned>(p.kv.heads_kv), static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>(plan.partitions));
  kernel<<<grid, Tl::kThreads, Tl::kSmemBytes, stream>>>(p, plan.partition_size, ws);
  DJL_ATTN_CUDA_CHECK_LAUNCH("paged_fp8_mma_kernel");
  if (plan.partition_size > 0) {
    const dim3 reduce_grid(static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.num_seqs));
    paged_attention_reduce_kernel<T>
        <<<reduce_grid, kThreads, ws.max_partitions * sizeof(float), stream>>>(
            p, plan.partition_size, ws);
    DJL_ATTN_CUDA_CHECK_LAUNCH("paged_attention_reduce_kernel");
  }
}

// Runs the plan's kFlashFp8 kernel for float16 or bfloat16 queries T and caches of C
// (paged_fp8_mma_<dtype>.cu).
template <typename T, typename C>
void launch_fp8_mma(const PagedAttentionParams& p, const DecodePlan& plan,
                    const PartitionWorkspace& ws, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (plan.fp8_head_dim) {
    case Fp8MmaHeadDim::k64: return launch_fp8_mma_head_dim<T, C, 64>(p, plan, ws, s);
    case Fp8MmaHeadDim::k128: return launch_fp8_mma_head_dim<T, C, 128>(p, plan, ws, s);
    case Fp8MmaHeadDim::k256: return launch_fp8_mma_head_dim<T, C, 256>(p, plan, ws, s);
  }
}

}  // namespace djl_attn::paged::kernels
