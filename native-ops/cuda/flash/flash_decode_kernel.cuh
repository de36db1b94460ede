// The split-KV decode kernel for float16 and bfloat16 on sm_80 and later (flash-decoding).
//
// One thread block of 4 warps per (batch row, head, key range). Its query rows (at most 16: in
// decode, the g query heads that share one key/value head) form one m16 mma tile, zero past the
// valid rows, held as A fragments in registers for the whole loop. Key/value tiles of kBlockN =
// 64 rows stream through shared memory; warp w owns rows [16w, 16w + 16) of every tile and
// loads them itself through a warp-private cp.async ring of kStages buffers, so the only
// synchronisation in the loop is __syncwarp. Each warp keeps its own online softmax (running
// max and sum per row, division deferred) and output accumulator over its keys; at the end the
// 4 warps' (max, sum, O) merge through shared memory. With several key ranges the block writes
// float32 partial outputs and logsumexps that flash_combine_kernel (flash_combine.cu) merges.
//
// Rows are addressed densely (row r at base + r * seq_stride) or through a paged cache's block
// table (kPaged). Rows past the valid length are zero-filled on load and their scores masked to
// -inf, so stale cache contents (NaN included) never reach the output.
//
// kFeatures: the sliding window and soft-capping (FlashParams). The key range starts at the
// first key its earliest row sees, aligned down to a tile, and the splits count their tiles from
// there; keys before the window inside that tile are zero-filled like those past the end and
// masked per row, every score of the window is soft-capped. kAlibi (with kFeatures): ALiBi too,
// FlashAttention's -slope * |position - key| on every visible score, each row's slope read once
// before the key loop (the GQA fold's rows are the group's query heads: each has its own).
// Template flags, as the tile kernel's kFeatures is: the plain instantiations keep their code and
// registers (ptxas figures in the commit that added kFeatures), and the kFeatures ones theirs
// (kAlibi false passes the same constant zeros to modify_score as before it existed).
//
// Included by the instantiation files flash_decode_{fp16,bf16}.cu (plain),
// flash_decode_{fp16,bf16}_features.cu (kFeatures) and flash_decode_{fp16,bf16}_alibi.cu
// (kFeatures and kAlibi).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/dependent_launch.cuh"
#include "cuda/flash/flash_decode.h"
#include "cuda/flash/flash_fwd_kernel.cuh"

namespace djl_attn::flash::decode {

struct DecodeArgs {
  FlashParams params;
  // Paged rows (kPaged): block table, its row stride, log2 of the block size.
  const int32_t* block_tables;
  int64_t table_stride;
  int block_shift;
  int num_splits;
  int n_blocks_per_split;  // key tiles per range
  // num_splits > 1: the layout flash_combine_kernel reads (fwd::FwdArgs), rows b * Sq + i.
  float* o_accum;      // [num_splits, Hq, accum_rows, D]
  float* lse_accum;    // [num_splits, Hq, accum_rows]
  int64_t accum_rows;  // B * Sq
  // kFeatures: the rows are the GQA fold's query heads of one query row (fold_query_groups),
  // all at position kv_len - 1; otherwise row i is at position i + kv_len - seqlen_q. (Last, so
  // that the plain kernels' parameter offsets stay as they were.)
  bool rows_share_position;
};

// Scores go to the exponential as base-2 logits (exp2 is the hardware's exponential).
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim>
struct DecodeTile {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16;                  // keys per warp per tile
  static constexpr int kBlockN = kWarps * kWarpRows;    // keys per tile
  // Buffers per warp ring: as many as keep 3 (D = 64), 2 (D = 128) or 1 (D = 256) blocks on
  // an SM with 228 KiB, with 16-64 KiB of reads in flight per block beyond the tile in use.
  static constexpr int kStages = kHeadDim <= 64 ? 4 : (kHeadDim <= 128 ? 3 : 2);
  static constexpr int kMinBlocks = kHeadDim <= 64 ? 3 : (kHeadDim <= 128 ? 2 : 1);
  static constexpr int kWarpTileElems = kWarpRows * kHeadDim;
  static constexpr int kRingBytes = 2 * kWarps * kStages * kWarpTileElems * 2;  // K and V
  static constexpr int kQBytes = 16 * kHeadDim * 2;
  // Epilogue (over the ring): per warp its 16 x D float32 output, rows padded by 8 floats so
  // that the fragment stores of 8 rows spread over the banks, then max and sum per row.
  static constexpr int kMergeStride = kHeadDim + 8;
  static constexpr int kMergeBytes = kWarps * 16 * kMergeStride * 4 + 2 * kWarps * 16 * 4;
  static_assert(kMergeBytes <= kRingBytes, "the merge buffers reuse the ring");
  static constexpr int kSmemBytes = kRingBytes + kQBytes;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(32 % kChunks == 0 || kChunks % 32 == 0, "lanes per row");
};

// The position of query row i of a block whose sequence has kv_len keys (kFeatures): the
// window's rules read positions, not rows. A function of values rather than a lambda in the
// kernel: a lambda capturing kv_len by reference moved ptxas's allocation of the plain kernels
// (sm_90, D = 128: 174 -> 176 registers) although they never call it.
__device__ __forceinline__ int row_position(const DecodeArgs& args, int kv_len, int i) {
  return args.rows_share_position ? kv_len - 1
                                   : i + kv_len - static_cast<int>(args.params.seqlen_q);
}

template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
__global__ void __launch_bounds__(DecodeTile<kHeadDim>::kThreads, DecodeTile<kHeadDim>::kMinBlocks)
    flash_decode_kernel(const DecodeArgs args) {
  static_assert(kFeatures || !kAlibi, "ALiBi runs in the features instantiations");
  using Tl = DecodeTile<kHeadDim>;
  using Sw = fwd::Swizzle<kHeadDim>;
  constexpr int kStages = Tl::kStages, kBlockN = Tl::kBlockN, kWarps = Tl::kWarps;
  constexpr int kDTiles = kHeadDim / 8;
  constexpr int kKSteps = kHeadDim / 16;
  constexpr int kChunks = Tl::kChunks;

  extern __shared__ uint4 smem_raw[];
  T* const s_ring = reinterpret_cast<T*>(smem_raw);
  T* const s_q = s_ring + Tl::kRingBytes / 2;

  const FlashParams& p = args.params;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t bh = blockIdx.x;
  const int64_t b = bh / p.heads_q;
  const int64_t h = bh % p.heads_q;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int split = blockIdx.y;
  // Batched calls only (the plans give this kernel no varlen call): flash_params.h.
  const SeqExtent<int, /*kVarlen=*/false> seq(p, b);
  const int seqlen_q = seq.seqlen_q;
  const int kv_len = seq.kv_len(p, b);
  // Row i sees key j iff j <= i + diagonal (bottom-right aligned), when causal.
  const int diagonal = kv_len - seqlen_q;
  // Keys [key_first, key_end) are the union of what the rows may see: all valid keys, or with a
  // window from the first key of the earliest row to the last key of the latest. Tiles count
  // from key_first's tile, so that a long context with a short window splits only the window.
  int key_first = 0, key_end = kv_len;
  int n_first = 0, n_tiles = (kv_len + kBlockN - 1) / kBlockN;
  if constexpr (kFeatures) {
    key_first = row_keys(p, row_position(args, kv_len, 0), kv_len).lo;
    key_end =
        max(row_keys(p, row_position(args, kv_len, seqlen_q - 1), kv_len).hi + 1, key_first);
    n_first = key_first / kBlockN;
    n_tiles = key_end > key_first ? (key_end + kBlockN - 1) / kBlockN : n_first;
  }
  const int n_begin = min(n_first + split * args.n_blocks_per_split, n_tiles);
  const int n_end = min(n_begin + args.n_blocks_per_split, n_tiles);

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + h_kv * p.v_head_stride;
  const int32_t* table = nullptr;
  if constexpr (kPaged) {
    table = args.block_tables + b * args.table_stride;
  } else {
    k += b * p.k_batch_stride;
    v += b * p.v_batch_stride;
  }

  // The query rows, zero past seqlen_q: one commit group of every thread, before the rings'.
  {
    constexpr int kTotal = 16 * kChunks;
    for (int idx = threadIdx.x; idx < kTotal; idx += Tl::kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const bool ok = r < seqlen_q;
      fwd::cp_async_16(s_q + fwd::smem_offset<kHeadDim>(r, c),
                       ok ? q + r * p.q_seq_stride + c * 8 : q, ok ? 16 : 0);
    }
    fwd::cp_async_commit();
  }

  // This warp's ring: kStages buffers of 16 key rows and 16 value rows.
  T* const s_k = s_ring + warp * kStages * Tl::kWarpTileElems;
  T* const s_v = s_ring + (kWarps + warp) * kStages * Tl::kWarpTileElems;

  // Paged: this warp's 16 rows of tile n span one cache block (block_size >= 16) or two (8).
  // Their physical ids, read only for rows inside the context, whose table entries are valid
  // (0 otherwise: such rows are never loaded). The main loop reads them one tile ahead of the
  // copies that use them, so that the table's latency is not on the path of issuing them.
  struct BlockIds {
    int lo, hi;
  };
  auto block_ids = [&](int n) {
    BlockIds ids{0, 0};
    if constexpr (kPaged) {
      const int seg0 = n * kBlockN + warp * 16;
      const int i_lo = seg0 >> args.block_shift;
      const int i_hi = (seg0 + 8) >> args.block_shift;
      if (seg0 < kv_len) ids.lo = __ldg(table + i_lo);
      ids.hi = ids.lo;
      if (i_hi != i_lo && seg0 + 8 < kv_len) ids.hi = __ldg(table + i_hi);
    }
    return ids;
  };

  // Loads this warp's 16 rows of key/value tile n into buffer `stage`. Lane (r0, c) copies
  // chunk c of rows r0, r0 + kRowsPerPass, ...
  auto load_kv = [&](int n, int stage, BlockIds ids) {
    constexpr int kRowsPerPass = kChunks >= 32 ? 1 : 32 / kChunks;
    constexpr int kLaneChunkSteps = kChunks >= 32 ? kChunks / 32 : 1;
    const int seg0 = n * kBlockN + warp * 16;
    const int r0 = kChunks >= 32 ? 0 : lane / kChunks;
    const int c0 = kChunks >= 32 ? lane : lane % kChunks;
    T* const dk = s_k + stage * Tl::kWarpTileElems;
    T* const dv = s_v + stage * Tl::kWarpTileElems;
    const int64_t blk_lo = ids.lo, blk_hi = ids.hi;
#pragma unroll
    for (int it = 0; it < 16 / kRowsPerPass; ++it) {
      const int r = r0 + it * kRowsPerPass;
      const int row = seg0 + r;
      // Keys before the window are not read either (zeros, like those past the end): a
      // probability of 0 times a NaN or Inf left in a stale slot would still be NaN.
      const bool ok = kFeatures ? row >= key_first && row < key_end : row < kv_len;
      int64_t k_off, v_off;
      if constexpr (kPaged) {
        const int64_t blk = r < 8 ? blk_lo : blk_hi;
        const int64_t slot = (blk << args.block_shift) + (row & ((1 << args.block_shift) - 1));
        k_off = slot * p.k_seq_stride;
        v_off = slot * p.v_seq_stride;
      } else {
        k_off = static_cast<int64_t>(row) * p.k_seq_stride;
        v_off = static_cast<int64_t>(row) * p.v_seq_stride;
      }
#pragma unroll
      for (int cs = 0; cs < kLaneChunkSteps; ++cs) {
        const int c = c0 + cs * 32;
        fwd::cp_async_16(dk + fwd::smem_offset<kHeadDim>(r, c), ok ? k + k_off + c * 8 : k,
                         ok ? 16 : 0);
        fwd::cp_async_16(dv + fwd::smem_offset<kHeadDim>(r, c), ok ? v + v_off + c * 8 : v,
                         ok ? 16 : 0);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (n_begin + s < n_end) load_kv(n_begin + s, s, block_ids(n_begin + s));
    fwd::cp_async_commit();
  }
  // Ids of the next tile to load (block_ids guards tiles past the context).
  BlockIds next_ids = block_ids(n_begin + kStages - 1);

  // The query tile: wait for its group (the oldest), make every thread's chunks visible, and
  // keep it as A fragments (rows lane % 16, chunks 2kk and 2kk + 1).
  fwd::cp_async_wait<kStages - 1>();
  __syncthreads();
  uint32_t q_frag[kKSteps][4];
  {
    const uint32_t q_addr = fwd::smem_addr(s_q);
    const uint32_t q_lane = Sw::lane_offset(lane % 16, lane / 16);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      fwd::ldmatrix_x4(q_frag[kk], q_addr + Sw::at(q_lane, kk * 2));
    }
  }

  float acc_o[kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[dt][e] = 0.f;
  // Rows g and g + 8 (g = lane / 4): running max of scores in the log2 domain and this
  // thread's partial sum over its columns (reduced over the quad at the end).
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.scale * kLog2e;
  const int g = lane / 4, t = lane % 4;
  // kAlibi: the slopes of this thread's rows g and g + 8, read once. A folded row i of
  // key/value head h is query head h * Sq + i (fold_query_groups); unfolded rows are all head h.
  float slope[2] = {0.f, 0.f};
  if constexpr (kAlibi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = g + hf * 8;
      if (r < seqlen_q) {
        const int64_t head = args.rows_share_position ? h * seqlen_q + r : h;
        slope[hf] = p.alibi_slopes[b * p.alibi_batch_stride + head];
      }
    }
  }
  const uint32_t k_lane = Sw::lane_offset(lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const uint32_t v_lane = Sw::lane_offset(lane % 8 + ((lane / 8) % 2) * 8, lane / 16);

  for (int n = n_begin; n < n_end; ++n) {
    const int stage = (n - n_begin) % kStages;
    fwd::cp_async_wait<kStages - 2>();
    // This warp's copies of tile n are visible to all its lanes, and every lane is done with
    // the buffer of tile n - 1, which the prefetch below overwrites.
    __syncwarp();
    {
      const int next = n + kStages - 1;
      if (next < n_end) {
        load_kv(next, (next - n_begin) % kStages, next_ids);
        next_ids = block_ids(next + 1);
      }
      fwd::cp_async_commit();
    }
    const uint32_t k_addr = fwd::smem_addr(s_k + stage * Tl::kWarpTileElems);
    const uint32_t v_addr = fwd::smem_addr(s_v + stage * Tl::kWarpTileElems);

    // S = Q K_w^T: 16 rows x this warp's 16 keys (two n8 tiles).
    float acc_s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t bk[4];
      fwd::ldmatrix_x4(bk, k_addr + Sw::at(k_lane, kk * 2));
      fwd::mma_16816<T>(acc_s[0], q_frag[kk], bk[0], bk[1]);
      fwd::mma_16816<T>(acc_s[1], q_frag[kk], bk[2], bk[3]);
    }

    // Scale into the log2 domain; mask keys past the context (and above the diagonal).
    const int key0 = n * kBlockN + warp * 16;
    if constexpr (kFeatures) {
      // Every score: the row's window (and causal limit), then the soft-cap and (kAlibi) the
      // ALiBi term in the natural-log domain, then into the log2 domain.
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int position = row_position(args, kv_len, g + hf * 8);
        const RowKeys<int> keys = row_keys(p, position, kv_len);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 2 * hf; e < 2 * hf + 2; ++e) {
            const int col = key0 + nt * 8 + 2 * t + (e & 1);
            const float distance = kAlibi ? static_cast<float>(abs(position - col)) : 0.f;
            acc_s[nt][e] = col < keys.lo || col > keys.hi
                               ? -INFINITY
                               : modify_score(acc_s[nt][e] * p.scale, p.softcap,
                                              kAlibi ? slope[hf] : 0.f, distance) *
                                     kLog2e;
          }
      }
    } else {
      const bool need_mask = key0 + 16 > kv_len || (p.causal && key0 + 15 > diagonal);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float s = acc_s[nt][e] * scale_log2;
          if (need_mask) {
            const int row = g + (e >= 2 ? 8 : 0);
            const int col = key0 + nt * 8 + 2 * t + (e & 1);
            if (col >= kv_len || (p.causal && col > row + diagonal)) s = -INFINITY;
          }
          acc_s[nt][e] = s;
        }
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
      const float correction = fwd::fast_exp2(row_max[hf] - base);
      row_max[hf] = mx;
      float sum = row_sum[hf] * correction;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        acc_o[dt][2 * hf] *= correction;
        acc_o[dt][2 * hf + 1] *= correction;
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float p0 = fwd::fast_exp2(acc_s[nt][2 * hf] - base);
        const float p1 = fwd::fast_exp2(acc_s[nt][2 * hf + 1] - base);
        acc_s[nt][2 * hf] = p0;
        acc_s[nt][2 * hf + 1] = p1;
        sum += p0 + p1;
      }
      row_sum[hf] = sum;
    }

    // O_w += P V_w: the two n8 score tiles are the A operand of one k16 step.
    uint32_t pa[4];
    pa[0] = fwd::pack2<T>(acc_s[0][0], acc_s[0][1]);
    pa[1] = fwd::pack2<T>(acc_s[0][2], acc_s[0][3]);
    pa[2] = fwd::pack2<T>(acc_s[1][0], acc_s[1][1]);
    pa[3] = fwd::pack2<T>(acc_s[1][2], acc_s[1][3]);
#pragma unroll
    for (int dp = 0; dp < kDTiles / 2; ++dp) {
      uint32_t bv[4];
      fwd::ldmatrix_x4_trans(bv, v_addr + Sw::at(v_lane, dp * 2));
      fwd::mma_16816<T>(acc_o[2 * dp], pa, bv[0], bv[1]);
      fwd::mma_16816<T>(acc_o[2 * dp + 1], pa, bv[2], bv[3]);
    }
  }
  // What is left is the warps' merge and a store: the combine pass (a programmatic dependent)
  // may be scheduled now, to wait on its side for this grid's writes.
  cuda::allow_dependent_launch();
  fwd::cp_async_wait<0>();  // nothing in flight into the ring that the merge reuses
  __syncthreads();

  // Merge the warps: per row, M = max_w m_w, L = sum_w l_w 2^(m_w - M),
  // O = sum_w O_w 2^(m_w - M) / L.
  float* const s_o = reinterpret_cast<float*>(smem_raw);
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
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<float2*>(o_row + dt * 8 + 2 * t) =
          make_float2(acc_o[dt][2 * hf], acc_o[dt][2 * hf + 1]);
    }
  }
  __syncthreads();

  const bool split_mode = args.o_accum != nullptr;
  constexpr int kQuads = kHeadDim / 4;
  for (int idx = threadIdx.x; idx < seqlen_q * kQuads; idx += Tl::kThreads) {
    const int r = idx / kQuads;
    const int c = (idx % kQuads) * 4;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_m[w * 16 + r]);
    const float base = m == -INFINITY ? 0.f : m;
    float l = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = fwd::fast_exp2(s_m[w * 16 + r] - base);
      l += s_l[w * 16 + r] * f;
      const float4 ow = *reinterpret_cast<const float4*>(s_o + (w * 16 + r) * Tl::kMergeStride + c);
      o.x += ow.x * f;
      o.y += ow.y * f;
      o.z += ow.z * f;
      o.w += ow.w * f;
    }
    // A row that saw no key: output 0 and the log of an empty sum.
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? (m + __log2f(l)) * 0.6931471805599453f : -INFINITY;
    o.x *= inv;
    o.y *= inv;
    o.z *= inv;
    o.w *= inv;
    if (split_mode) {
      const int64_t acc_row = (split * p.heads_q + h) * args.accum_rows + b * p.seqlen_q + r;
      *reinterpret_cast<float4*>(args.o_accum + acc_row * kHeadDim + c) = o;
      if (c == 0) args.lse_accum[acc_row] = lse;
    } else {
      T* const out = static_cast<T*>(p.out) + b * p.out_batch_stride + r * p.out_seq_stride +
                     h * p.out_head_stride + c;
      uint2 packed;
      packed.x = fwd::pack2<T>(o.x, o.y);
      packed.y = fwd::pack2<T>(o.z, o.w);
      *reinterpret_cast<uint2*>(out) = packed;
      if (c == 0 && p.lse != nullptr) p.lse[lse_offset(p, b, h) + r] = lse;
    }
  }
}

// Opts the kernel into its shared memory on `device` once and returns its resident blocks per
// SM there.
template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
int decode_blocks_per_sm(int device) {
  using Tl = DecodeTile<kHeadDim>;
  constexpr int kMaxDevices = 64;
  // 0 = not yet prepared. Racing threads do the same idempotent work and store the same value.
  static std::atomic<int> cached[kMaxDevices];
  auto kernel = flash_decode_kernel<T, kHeadDim, kPaged, kFeatures, kAlibi>;
  int blocks = device >= 0 && device < kMaxDevices ? cached[device].load() : 0;
  if (blocks == 0) {
    DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Tl::kSmemBytes));
    DJL_ATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Tl::kThreads,
                                                                      Tl::kSmemBytes));
    if (blocks < 1) {
      fail_native("flash_decode_kernel<", kHeadDim, ">: does not fit on device ", device, " (",
                  Tl::kSmemBytes, " bytes of shared memory, ", Tl::kThreads, " threads)");
    }
    if (device >= 0 && device < kMaxDevices) cached[device].store(blocks);
  }
  return blocks;
}

// Launches one instantiation; decode_blocks_per_sm(device) has run before.
template <typename T, int kHeadDim, bool kPaged, bool kFeatures, bool kAlibi>
void launch_decode(const DecodeArgs& args, cudaStream_t stream) {
  using Tl = DecodeTile<kHeadDim>;
  const dim3 grid(static_cast<unsigned>(args.params.batch * args.params.heads_q),
                  static_cast<unsigned>(args.num_splits));
  flash_decode_kernel<T, kHeadDim, kPaged, kFeatures, kAlibi>
      <<<grid, Tl::kThreads, Tl::kSmemBytes, stream>>>(args);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_decode_kernel");
}

}  // namespace djl_attn::flash::decode

#define DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, HEAD_DIM, PAGED, FEATURES, ALIBI)                 \
  template int                                                                                 \
  djl_attn::flash::decode::decode_blocks_per_sm<T, HEAD_DIM, PAGED, FEATURES, ALIBI>(int);     \
  template void djl_attn::flash::decode::launch_decode<T, HEAD_DIM, PAGED, FEATURES, ALIBI>(   \
      const djl_attn::flash::decode::DecodeArgs&, cudaStream_t);
// Every (head dim, row policy) of one dtype, without (plain) or with (features) the sliding
// window and soft-cap, or with them and ALiBi (alibi): one file each, so that nvcc compiles them
// in parallel.
#define DJL_FLASH_DECODE_INSTANTIATE_FOR_(T, FEATURES, ALIBI)        \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 64, false, FEATURES, ALIBI)   \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 64, true, FEATURES, ALIBI)    \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 128, false, FEATURES, ALIBI)  \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 128, true, FEATURES, ALIBI)   \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 256, false, FEATURES, ALIBI)  \
  DJL_FLASH_DECODE_INSTANTIATE_ONE_(T, 256, true, FEATURES, ALIBI)
#define DJL_FLASH_DECODE_INSTANTIATE(T) DJL_FLASH_DECODE_INSTANTIATE_FOR_(T, false, false)
#define DJL_FLASH_DECODE_INSTANTIATE_FEATURES(T) DJL_FLASH_DECODE_INSTANTIATE_FOR_(T, true, false)
#define DJL_FLASH_DECODE_INSTANTIATE_ALIBI(T) DJL_FLASH_DECODE_INSTANTIATE_FOR_(T, true, true)
