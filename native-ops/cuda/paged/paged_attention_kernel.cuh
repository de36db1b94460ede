// The paged decode attention kernel (after vLLM's PagedAttention and FlashDecoding, written for
// this project's cache layout [num_blocks, block_size, Hkv, D]).
//
// Decode is a stream over K/V: the design goal is that every cache byte is read once and that
// enough 16-byte loads are in flight to keep HBM busy.
// - One thread block of 4 warps per (sequence, kv head, tile of up to 4 query heads of that kv
//   head's GQA group[, partition]). The tile's queries live in registers, so each K/V byte a
//   block reads serves all of its query heads (Hq / Hkv = 4 in LLaMA-style models: 4x fewer
//   bytes than one block per query head). A group larger than 4 (MQA) takes several tiles, whose
//   blocks sit next to each other in the grid so that their shared K/V mostly hits L2.
// - Each warp streams whole cache blocks (block start + warp, + 4, ...): a row group of lanes
//   (a power of two, D / vector elements rounded up) covers one token's row with 16-byte loads,
//   so one warp instruction reads 32 / lanes-per-row tokens; a lane issues the K and V loads of
//   several tokens before it uses any of them. The block ids of the warp's next 32 cache blocks
//   are loaded once into one register per lane and handed out by shuffles, so the table lookup
//   does not serialise with every block's loads.
// - Softmax is online, per lane (running max, sum and float32 accumulator per query head), so no
//   score is stored and nothing waits on a barrier inside the loop; row groups, then warps
//   (through shared memory) are merged at the end with the usual rescaling.
// v1 covers the whole context in one thread block per (sequence, kv head, tile); v2 splits the
// context into partitions of 512 tokens (down to 64 when the grid would be too small to fill the
// GPU) and writes each partition's max, sum and normalised output per query head; the reduce
// kernel rescales and combines them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/convert.cuh"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/paged/paged_fp8.cuh"
#include "cuda/paged/paged_plan.h"
#include "paged/paged_params.h"

namespace djl_attn::paged::kernels {

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;

// 16 bytes of cache elements C unpacked to float32 (16 / sizeof(C) values).
template <typename C>
__device__ __forceinline__ void unpack(const uint4& raw, float* out);

template <>
__device__ __forceinline__ void unpack<float>(const uint4& raw, float* out) {
  out[0] = __uint_as_float(raw.x);
  out[1] = __uint_as_float(raw.y);
  out[2] = __uint_as_float(raw.z);
  out[3] = __uint_as_float(raw.w);
}

template <>
__device__ __forceinline__ void unpack<__half>(const uint4& raw, float* out) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <>
__device__ __forceinline__ void unpack<__nv_bfloat16>(const uint4& raw, float* out) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// 16 fp8 values: the byte values, unscaled (the kernel folds the scales into the query and the
// output).
template <typename C>
__device__ __forceinline__ void unpack_fp8(const uint4& raw, float* out) {
  const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 f = fp8x2_to_float2<C>(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <>
__device__ __forceinline__ void unpack<Fp8E4M3>(const uint4& raw, float* out) {
  unpack_fp8<Fp8E4M3>(raw, out);
}

template <>
__device__ __forceinline__ void unpack<Fp8E5M2>(const uint4& raw, float* out) {
  unpack_fp8<Fp8E5M2>(raw, out);
}

using cuda::from_float;
using cuda::to_float;
using cuda::ptx::cp_async_16;
using cuda::ptx::cp_async_commit;
using cuda::ptx::cp_async_wait;
using cuda::ptx::smem_addr;

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, mask));
  }
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) x += __shfl_xor_sync(0xffffffffu, x, mask);
  return x;
}

// Every thread of the block gets the result; `red` is kWarps floats used only by this call.
__device__ __forceinline__ float block_max(float x, float* red) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  x = warp_max(x);
  if (lane == 0) red[warp] = x;
  __syncthreads();
  return warp_max(lane < kWarps ? red[lane] : -INFINITY);
}

__device__ __forceinline__ float block_sum(float x, float* red) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  x = warp_sum(x);
  if (lane == 0) red[warp] = x;
  __syncthreads();
  return warp_sum(lane < kWarps ? red[lane] : 0.f);
}

// The smallest power of two >= both a (a power of two) and b.
constexpr int pow2_at_least(int a, int b) { return a >= b ? a : pow2_at_least(2 * a, b); }

// K vectors (and as many V vectors) a lane loads before it uses the first. With 4, every
// instantiation fits 168 registers without spills (ptxas, sm_90), so 3 blocks (12 warps) stay
// resident per SM: 12 x 32 lanes x 8 x 16 bytes = 48 KiB in flight per SM. 8 loads needed up to
// 255 registers and spilled; capping those at 128 registers spilled too.
constexpr int kLoadsPerChunk = 4;
// Resident thread blocks per SM the register budget is held to (65536 / (3 x 128) = 170).
constexpr int kMinBlocksPerSm = 3;

// How the decode kernel trades occupancy against loads in flight (DJL_ATTN_PAGED_CONFIG,
// StreamConfig in paged_plan.h). kStages 0: K/V go straight from global memory to registers,
// kLoads K and kLoads V vectors per lane in flight. kStages > 0: each warp streams its chunks
// through a ring of kStages chunks in shared memory with cp.async, kStages - 1 chunks ahead of
// the one it computes on, so bytes in flight cost shared memory instead of registers. kPrefetch
// (register configurations only): at the start of each cache block, prefetch the warp's next
// cache block into L2, so that its loads later wait on L2 rather than on DRAM, at no register
// cost.
template <int kWarps_, int kLoads_, int kMinBlocks_, int kStages_, bool kPrefetch_ = false>
struct KernelConfig {
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps_ * kWarpSize;
  static constexpr int kLoads = kLoads_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kStages = kStages_;
  static constexpr bool kPrefetch = kPrefetch_;
  static_assert(kStages_ == 0 || kStages_ >= 2, "a ring needs a chunk to fill and one to use");
  static_assert(kStages_ == 0 || !kPrefetch_, "the ring is its own prefetch");
};
// The configuration measured in docs/design/paged-cuda.md; every shape has it.
using DefaultConfig = KernelConfig<kWarps, kLoadsPerChunk, kMinBlocksPerSm, 0>;

// C: the cache's element type (that of the query, or Fp8E4M3 / Fp8E5M2).
template <typename C, int kHeadDim, int kBlockSize, int kLoads = kLoadsPerChunk>
struct PagedTraits {
  static constexpr int kVecElems = 16 / sizeof(C);
  static constexpr int kVecs = kHeadDim / kVecElems;  // 16-byte vectors per key/value row
  static_assert(kHeadDim % kVecElems == 0, "a row must be a whole number of 16-byte vectors");
  // Lanes per row: a power of two so that the dot product reduces with xor shuffles inside an
  // aligned row group (D = 80 in float16 is 10 vectors: 16 lanes, 6 of them idle).
  static constexpr int kLanesPerRow = pow2_at_least(1, kVecs) < kWarpSize
                                          ? pow2_at_least(1, kVecs) : kWarpSize;
  static constexpr int kRowsPerPass = kWarpSize / kLanesPerRow;  // tokens per warp instruction
  static constexpr int kRowVecs = (kVecs + kLanesPerRow - 1) / kLanesPerRow;  // per lane
  static constexpr bool kFullRows = kVecs % kLanesPerRow == 0;  // no idle lanes
  static_assert(kBlockSize % kRowsPerPass == 0, "block sizes 8, 16 and 32");
  static constexpr int kTokensPerLane = kBlockSize / kRowsPerPass;  // per cache block
  static constexpr int kChunkWanted = kLoads / kRowVecs > 0 ? kLoads / kRowVecs : 1;
  static constexpr int kChunk = kTokensPerLane < kChunkWanted ? kTokensPerLane : kChunkWanted;
  static constexpr int kChunks = kTokensPerLane / kChunk;
  static_assert(kTokensPerLane % kChunk == 0, "chunks split a cache block evenly");
  // 16-byte K vectors (as many V) a lane moves per chunk.
  static constexpr int kChunkVecs = kChunk * kRowVecs;
};

// kBlockSize kRunTimeBlockSize: the kernel takes the cache's block size (p.kv.block_size, any of
// the list's) at run time, so that one kernel per head dim serves every block size (fp8 caches:
// block_size_at_run_time in paged_plan.h). A warp then steps over kRunTimeStep tokens at a time,
// 32 / block_size cache blocks, and finds a token's cache block and row with a shift and a mask;
// its chunks are those of a 32-token block, so block sizes 8 and 16 keep as many loads in flight
// as 32 (a compiled block size 8 has one or two tokens per lane per block).
constexpr int kRunTimeBlockSize = 0;
constexpr int kRunTimeStep = 32;

// Powers of two that divide kRunTimeStep: what the shift and the mask need.
constexpr bool runs_at_run_time(int block_size) {
  return block_size > 0 && kRunTimeStep % block_size == 0 &&
         (block_size & (block_size - 1)) == 0;
}
static_assert([] {
  for (int b : kBlockSizes) {
    if (!runs_at_run_time(b)) return false;
  }
  return true;
}(), "every block size of the list divides the run-time kernel's step");

// Tokens a warp takes per step: a cache block, or kRunTimeStep.
constexpr int step_tokens(int block_size) {
  return block_size == kRunTimeBlockSize ? kRunTimeStep : block_size;
}

// The sliding window (PagedAttentionParams::window_left) in v1/v2: the first key the query at
// context - 1 sees, and the token a sequence's steps (v1) or first partition (v2) start from:
// that key aligned down to kWindowAlign (paged_plan.h), a multiple of every step, so steps and
// partitions stay on cache block boundaries. Keys before the window never reach a score or the
// output (the shared-memory ring may copy the aligned slack; its consumer takes zeros there).
static_assert([] {
  for (int b : kBlockSizes) {
    if (kWindowAlign % b != 0) return false;
  }
  return kWindowAlign % kRunTimeStep == 0;
}(), "the window's start is aligned to a multiple of every step");

// The first key the query at context - 1 sees (paged_params.h's rule).
__device__ __forceinline__ int first_visible(int context, int64_t window_left) {
  return static_cast<int>(first_visible_key(context - 1, window_left));
}

__device__ __forceinline__ int window_base(int first) { return first & ~(kWindowAlign - 1); }

// Workspace of v2, all float32: [num_seqs, Hq, max_partitions] maxima and sums, and
// [num_seqs, Hq, max_partitions, D] partition outputs already divided by their own sums.
struct PartitionWorkspace {
  float* max_logits;
  float* exp_sums;
  float* out;
  int max_partitions;
};

__device__ __forceinline__ uint4 load_vec(const void* ptr) {
  return __ldg(reinterpret_cast<const uint4*>(ptr));
}

// exp(m_old - m_new) for merging a running state whose max was m_old; 0 for an empty state
// (m_old = -inf, sum and accumulator 0), also when both are empty (no NaN from -inf - -inf).
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == -INFINITY ? 0.f : __expf(m_old - m_new);
}

__device__ __forceinline__ void prefetch_l2(const void* gmem) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(gmem));
}

// Floats of the end-of-kernel merge area: per warp and tile head, the accumulator row, then
// the maxima, then the sums.
template <int kWarpCount, int kHeadDim>
constexpr int merge_floats() { return kWarpCount * kHeadTile * (kHeadDim + 2); }

// Bytes of dynamic shared memory a configuration needs: the ring (which the merge area reuses
// once the ring is drained), 0 for the register configurations.
template <typename C, int kHeadDim, int kBlockSize, typename Config>
constexpr int ring_smem_bytes() {
  using Traits = PagedTraits<C, kHeadDim, step_tokens(kBlockSize), Config::kLoads>;
  constexpr int ring = Config::kWarps * Config::kStages * 2 * Traits::kChunkVecs * kWarpSize * 16;
  constexpr int merge = merge_floats<Config::kWarps, kHeadDim>() * 4;
  return Config::kStages == 0 ? 0 : (ring > merge ? ring : merge);
}

// Grid (Hkv * head_tiles, num_seqs, partitions): blockIdx.x = kv head * head_tiles + tile.
// partition_size 0: v1, the whole context, output to p.out; otherwise v2, output to `ws`.
// T: the query's and output's type; C: the caches' (T, or fp8 bytes, whose scales are
// folded into the query (k_scale) and the output (v_scale): byte values go straight into the
// dot products and the accumulators).
template <typename T, typename C, int kHeadDim, int kBlockSize, typename Config = DefaultConfig>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocks)
    paged_attention_kernel(PagedAttentionParams p, int partition_size, int head_tiles,
                           PartitionWorkspace ws) {
  // The ring and the L2 prefetch read a whole cache block per step: compiled block sizes only.
  static_assert(kBlockSize != kRunTimeBlockSize || (Config::kStages == 0 && !Config::kPrefetch),
                "the run-time block size runs the register configurations without prefetch");
  constexpr int kStep = step_tokens(kBlockSize);
  using Traits = PagedTraits<C, kHeadDim, kStep, Config::kLoads>;
  constexpr int kVecElems = Traits::kVecElems;
  constexpr int kVecs = Traits::kVecs;
  constexpr int kLanesPerRow = Traits::kLanesPerRow;
  constexpr int kRowsPerPass = Traits::kRowsPerPass;
  constexpr int kRowVecs = Traits::kRowVecs;
  constexpr int kChunk = Traits::kChunk;
  constexpr int kChunkVecs = Traits::kChunkVecs;
  constexpr int kW = Config::kWarps;
  constexpr int kT = Config::kThreads;
  constexpr int kStages = Config::kStages;
  constexpr int kMergeFloats = merge_floats<kW, kHeadDim>();

  // The merge area: static for the register configurations; in the ring's memory otherwise.
  __shared__ __align__(16) float merge_static[kStages == 0 ? kMergeFloats : 1];
  extern __shared__ __align__(16) uint4 ring[];
  float* const part_acc = kStages == 0 ? merge_static : reinterpret_cast<float*>(ring);
  float* const part_max = part_acc + kW * kHeadTile * kHeadDim;
  float* const part_sum = part_max + kW * kHeadTile;

  const int group = static_cast<int>(p.heads_q / p.kv.heads_kv);
  const int kv_head = blockIdx.x / head_tiles;
  const int tile = blockIdx.x % head_tiles;
  const int first_head = kv_head * group + tile * kHeadTile;
  const int tile_heads = min(kHeadTile, group - tile * kHeadTile);
  const int64_t seq = blockIdx.y;
  const int part = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int context = p.kv.context_lens[seq];
  const bool partitioned = partition_size > 0;
  // Keys before first_token are outside the window; v1's steps and v2's partitions count from
  // the window's aligned start (0 without a window).
  const int first_token = first_visible(context, p.window_left);
  const int start_token = window_base(first_token) + (partitioned ? part * partition_size : 0);
  // The call's head dim: kHeadDim, or less (a head dim the launcher runs on the next compiled
  // one, paged_plan.h): the row's first `vecs` vectors are loaded, the rest stay zero and are
  // never stored.
  const int head_dim = static_cast<int>(p.kv.head_dim);
  const int vecs = head_dim / kVecElems;
  T* out = static_cast<T*>(p.out) + (seq * p.heads_q + first_head) * head_dim;
  if (start_token >= context) {
    // Only v1 sees a context of 0 here; v2's reduce kernel writes those zeros.
    if (!partitioned) {
      for (int i = tid; i < tile_heads * head_dim; i += kT) out[i] = from_float<T>(0.f);
    }
    return;
  }
  const int end_token = partitioned ? min(start_token + partition_size, context) : context;
  // Steps of kStep tokens (cache blocks when the block size is compiled); partitions start on
  // one (partition sizes are multiples of 64).
  const int start_block = start_token / kStep;
  const int end_block = (end_token + kStep - 1) / kStep;
  // The run-time block size: log2 of it, cache blocks per step, steps whose cache block ids a
  // warp's 32 lanes hold, and the context's cache blocks (the table entries there are to read).
  const int block_shift =
      kBlockSize == kRunTimeBlockSize ? __ffs(static_cast<int>(p.kv.block_size)) - 1 : 0;
  const int block_mask = (1 << block_shift) - 1;
  const int blocks_per_step = kStep >> block_shift;
  const int steps_per_ids = kWarpSize / blocks_per_step;
  const int end_cache_block = (end_token + block_mask) >> block_shift;
  const int64_t token_stride = p.kv.heads_kv * head_dim;  // between tokens of a cache block
  const int32_t* table = p.kv.block_tables + seq * p.kv.table_stride;
  const C* k_cache = static_cast<const C*>(p.kv.key_cache) + kv_head * head_dim;
  const C* v_cache = static_cast<const C*>(p.kv.value_cache) + kv_head * head_dim;
  const float q_scale = p.scale * scale_of(p.kv.k_scale, kv_head);
  const float out_scale = scale_of(p.kv.v_scale, kv_head);
  // The soft-cap: a uniform branch per score, not taken on the default path.
  const float softcap = p.softcap;
  const int row_lane = lane % kLanesPerRow;
  const int row_slot = lane / kLanesPerRow;

  // The tile's queries, scale folded in, as the lane's slices of the row; heads past the tile
  // (a group smaller than the tile) get zeros and their results are never written.
  float q[kHeadTile][kRowVecs][kVecElems];
  float slope[kHeadTile];
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
    const bool live = h < tile_heads;
    const int head = first_head + h;
    slope[h] = live ? alibi_slope(p, seq, head) : 0.f;
    // Element loads: a strided query view need not be 16-byte aligned.
    const T* q_row = static_cast<const T*>(p.query) + seq * p.q_seq_stride +
                     (live ? head : first_head) * p.q_head_stride;
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) {
      const int v = row_lane + j * kLanesPerRow;
      const bool load = live && v < vecs;
#pragma unroll
      for (int e = 0; e < kVecElems; ++e) {
        q[h][j][e] = load ? to_float(q_row[v * kVecElems + e]) * q_scale : 0.f;
      }
    }
  }

  // Running softmax state of this lane's tokens, per query head of the tile.
  float run_max[kHeadTile], run_sum[kHeadTile];
  float acc[kHeadTile][kRowVecs][kVecElems];
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
    run_max[h] = -INFINITY;
    run_sum[h] = 0.f;
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) {
#pragma unroll
      for (int e = 0; e < kVecElems; ++e) acc[h][j][e] = 0.f;
    }
  }

  // The ring (kStages > 0): the producer runs kStages - 1 chunks ahead of the consumer below,
  // over the same sequence of (cache block, chunk) steps, with its own block-id register.
  // Chunk slot i of the lane's K (V) in stage s: ring[((warp * kStages + s) * 2 + 0 (1)) *
  // kChunkVecs + i) * 32 + lane]: 32 lanes write and read 512 consecutive bytes, no conflicts.
  int prod_block = start_block + warp, prod_chunk = 0, prod_iter = 0, prod_ids = 0;
  int prod_stage = 0;
  auto produce = [&]() {
    if (prod_block < end_block) {
      if (prod_chunk == 0 && prod_iter % kWarpSize == 0) {
        const int ahead = prod_block + lane * kW;
        prod_ids = ahead < end_block ? table[ahead] : 0;
      }
      const int64_t physical = __shfl_sync(0xffffffffu, prod_ids, prod_iter % kWarpSize);
      const C* k_block = k_cache + physical * kStep * token_stride;
      const C* v_block = v_cache + physical * kStep * token_stride;
      uint4* k_ring = ring + ((warp * kStages + prod_stage) * 2) * kChunkVecs * kWarpSize + lane;
      uint4* v_ring = k_ring + kChunkVecs * kWarpSize;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const int t = row_slot + (prod_chunk * kChunk + c) * kRowsPerPass;
        // Slots past the context are not copied; the consumer substitutes zeros.
        if (prod_block * kStep + t < end_token) {
#pragma unroll
          for (int j = 0; j < kRowVecs; ++j) {
            const int v = row_lane + j * kLanesPerRow;
            if (v < vecs) {
              // The issuing lane is the only one that reads these bytes back, so the wait
              // below is the only synchronisation they need.
              cp_async_16(smem_addr(k_ring + (c * kRowVecs + j) * kWarpSize),
                          k_block + t * token_stride + v * kVecElems);
              cp_async_16(smem_addr(v_ring + (c * kRowVecs + j) * kWarpSize),
                          v_block + t * token_stride + v * kVecElems);
            }
          }
        }
      }
      if (++prod_chunk == Traits::kChunks) {
        prod_chunk = 0;
        prod_block += kW;
        ++prod_iter;
      }
    }
    // Always a group, empty past the end, so that the consumer's wait count stays fixed.
    cp_async_commit();
    prod_stage = prod_stage + 1 == kStages ? 0 : prod_stage + 1;
  };
  if constexpr (kStages > 0) {
#pragma unroll 1
    for (int s = 0; s + 1 < kStages; ++s) produce();
  }
  int cons_stage = 0;

  // lane i: physical id of the warp's (iter / 32 * 32 + i)-th cache block; at run-time block
  // size, of cache block i % blocks_per_step of the warp's (iter / steps_per_ids *
  // steps_per_ids + i / blocks_per_step)-th step.
  int ids = 0;
  int iter = 0;
  for (int b = start_block + warp; b < end_block; b += kW, ++iter) {
    int64_t physical = 0;
    // Run-time block size: the lane of `ids` that holds this step's first cache block.
    int step_lane = 0;
    if constexpr (kBlockSize == kRunTimeBlockSize) {
      const int step_in_ids = iter & (steps_per_ids - 1);
      if (step_in_ids == 0) {
        const int ahead =
            (b + (lane / blocks_per_step) * kW) * blocks_per_step + lane % blocks_per_step;
        ids = ahead < end_cache_block ? table[ahead] : 0;
      }
      step_lane = step_in_ids * blocks_per_step;
    } else if constexpr (kStages == 0) {
      if (iter % kWarpSize == 0) {
        const int ahead = b + lane * kW;
        ids = ahead < end_block ? table[ahead] : 0;
      }
      physical = __shfl_sync(0xffffffffu, ids, iter % kWarpSize);
      if constexpr (Config::kPrefetch) {
        // The warp's next cache block: its id is in `ids` unless it starts the next 32.
        int next = __shfl_sync(0xffffffffu, ids, (iter + 1) % kWarpSize);
        const int next_b = b + kW;
        if (next_b < end_block) {
          if ((iter + 1) % kWarpSize == 0) next = table[next_b];
          const C* k_next = k_cache + static_cast<int64_t>(next) * kStep * token_stride;
          const C* v_next = v_cache + static_cast<int64_t>(next) * kStep * token_stride;
#pragma unroll
          for (int i = 0; i < Traits::kTokensPerLane; ++i) {
            const int t = row_slot + i * kRowsPerPass;
            // Rows past the context stay inside the block, which is allocated: harmless.
#pragma unroll
            for (int j = 0; j < kRowVecs; ++j) {
              const int v = row_lane + j * kLanesPerRow;
              if (v < vecs) {
                prefetch_l2(k_next + t * token_stride + v * kVecElems);
                prefetch_l2(v_next + t * token_stride + v * kVecElems);
              }
            }
          }
        }
      }
    }
    const C* k_block = k_cache + physical * kStep * token_stride;
    const C* v_block = v_cache + physical * kStep * token_stride;
    const int block_start = b * kStep;
    // Not unrolled: the compiler would hoist every chunk's loads and run out of registers.
#pragma unroll 1
    for (int chunk = 0; chunk < Traits::kChunks; ++chunk) {
      // Every load of the chunk is issued before any is used. Slots past the context may hold
      // anything, NaN included: they are not loaded (zeros) and get weight 0.
      uint4 k_raw[kChunk][kRowVecs], v_raw[kChunk][kRowVecs];
      bool valid[kChunk];
      const uint4* k_ring = nullptr;
      const uint4* v_ring = nullptr;
      if constexpr (kStages > 0) {
        produce();
        // All but the kStages - 1 newest groups are done: this chunk's is.
        cp_async_wait<kStages - 1>();
        k_ring = ring + ((warp * kStages + cons_stage) * 2) * kChunkVecs * kWarpSize + lane;
        v_ring = k_ring + kChunkVecs * kWarpSize;
        cons_stage = cons_stage + 1 == kStages ? 0 : cons_stage + 1;
      }
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const int t = row_slot + (chunk * kChunk + c) * kRowsPerPass;
        valid[c] = block_start + t < end_token && block_start + t >= first_token;
        // Run-time block size: the token's row of the cache (its cache block's id from `ids`;
        // every lane shuffles, whether or not it loads).
        int64_t row = 0;
        if constexpr (kBlockSize == kRunTimeBlockSize) {
          const int64_t cache_block =
              __shfl_sync(0xffffffffu, ids, step_lane + (t >> block_shift));
          row = (cache_block << block_shift) + (t & block_mask);
        }
#pragma unroll
        for (int j = 0; j < kRowVecs; ++j) {
          const int v = row_lane + j * kLanesPerRow;
          k_raw[c][j] = make_uint4(0, 0, 0, 0);
          v_raw[c][j] = make_uint4(0, 0, 0, 0);
          if (valid[c] && v < vecs) {
            if constexpr (kBlockSize == kRunTimeBlockSize) {
              k_raw[c][j] = load_vec(k_cache + row * token_stride + v * kVecElems);
              v_raw[c][j] = load_vec(v_cache + row * token_stride + v * kVecElems);
            } else if constexpr (kStages == 0) {
              k_raw[c][j] = load_vec(k_block + t * token_stride + v * kVecElems);
              v_raw[c][j] = load_vec(v_block + t * token_stride + v * kVecElems);
            } else {
              // V is read from the ring after the scores, so K's registers serve it too.
              k_raw[c][j] = k_ring[(c * kRowVecs + j) * kWarpSize];
            }
          }
        }
      }

      // Scores: the lane's partial dot products, summed over the row group.
      float score[kChunk][kHeadTile];
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        float dot[kHeadTile] = {};
#pragma unroll
        for (int j = 0; j < kRowVecs; ++j) {
          float k[kVecElems];
          unpack<C>(k_raw[c][j], k);
#pragma unroll
          for (int h = 0; h < kHeadTile; ++h) {
#pragma unroll
            for (int e = 0; e < kVecElems; ++e) dot[h] += q[h][j][e] * k[e];
          }
        }
        const int token = block_start + row_slot + (chunk * kChunk + c) * kRowsPerPass;
        const float distance = static_cast<float>(token - (context - 1));
#pragma unroll
        for (int h = 0; h < kHeadTile; ++h) {
#pragma unroll
          for (int mask = kLanesPerRow / 2; mask > 0; mask /= 2) {
            dot[h] += __shfl_xor_sync(0xffffffffu, dot[h], mask);
          }
          if (softcap > 0.f) dot[h] = softcap * tanhf(dot[h] / softcap);
          score[c][h] = valid[c] ? dot[h] + slope[h] * distance : -INFINITY;
        }
      }

      if constexpr (kStages > 0) {
#pragma unroll
        for (int c = 0; c < kChunk; ++c) {
#pragma unroll
          for (int j = 0; j < kRowVecs; ++j) {
            const int v = row_lane + j * kLanesPerRow;
            if (valid[c] && v < vecs) {
              v_raw[c][j] = v_ring[(c * kRowVecs + j) * kWarpSize];
            }
          }
        }
      }

      // Online softmax: one rescale per chunk, one exp per token.
#pragma unroll
      for (int h = 0; h < kHeadTile; ++h) {
        float chunk_max = score[0][h];
#pragma unroll
        for (int c = 1; c < kChunk; ++c) chunk_max = fmaxf(chunk_max, score[c][h]);
        const float new_max = fmaxf(run_max[h], chunk_max);
        const float correction = rescale(run_max[h], new_max);
        run_max[h] = new_max;
        run_sum[h] *= correction;
#pragma unroll
        for (int j = 0; j < kRowVecs; ++j) {
#pragma unroll
          for (int e = 0; e < kVecElems; ++e) acc[h][j][e] *= correction;
        }
#pragma unroll
        for (int c = 0; c < kChunk; ++c) {
          // A valid score is finite, and then so is new_max.
          score[c][h] = valid[c] ? __expf(score[c][h] - new_max) : 0.f;
          run_sum[h] += score[c][h];
        }
      }

      // Probability-weighted values.
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
#pragma unroll
        for (int j = 0; j < kRowVecs; ++j) {
          float val[kVecElems];
          unpack<C>(v_raw[c][j], val);
#pragma unroll
          for (int h = 0; h < kHeadTile; ++h) {
#pragma unroll
            for (int e = 0; e < kVecElems; ++e) acc[h][j][e] += score[c][h] * val[e];
          }
        }
      }
    }
  }
  if constexpr (kStages > 0) {
    // The producer's last groups are empty, but the ring's memory becomes the merge area below:
    // every warp must be done with it first.
    cp_async_wait<0>();
    __syncthreads();
  }

  // Merge the row groups of the warp (lanes kLanesPerRow apart hold the same row slice).
#pragma unroll
  for (int mask = kLanesPerRow; mask < kWarpSize; mask *= 2) {
#pragma unroll
    for (int h = 0; h < kHeadTile; ++h) {
      const float other_max = __shfl_xor_sync(0xffffffffu, run_max[h], mask);
      const float other_sum = __shfl_xor_sync(0xffffffffu, run_sum[h], mask);
      const float new_max = fmaxf(run_max[h], other_max);
      const float mine = rescale(run_max[h], new_max), theirs = rescale(other_max, new_max);
      run_max[h] = new_max;
      run_sum[h] = run_sum[h] * mine + other_sum * theirs;
#pragma unroll
      for (int j = 0; j < kRowVecs; ++j) {
#pragma unroll
        for (int e = 0; e < kVecElems; ++e) {
          const float other = __shfl_xor_sync(0xffffffffu, acc[h][j][e], mask);
          acc[h][j][e] = acc[h][j][e] * mine + other * theirs;
        }
      }
    }
  }
  if (row_slot == 0) {
#pragma unroll
    for (int h = 0; h < kHeadTile; ++h) {
      float* row = part_acc + (warp * kHeadTile + h) * kHeadDim;
#pragma unroll
      for (int j = 0; j < kRowVecs; ++j) {
        const int v = row_lane + j * kLanesPerRow;
        if (Traits::kFullRows || v < kVecs) {
#pragma unroll
          for (int e = 0; e < kVecElems; ++e) row[v * kVecElems + e] = acc[h][j][e];
        }
      }
      if (lane == 0) {
        part_max[warp * kHeadTile + h] = run_max[h];
        part_sum[warp * kHeadTile + h] = run_sum[h];
      }
    }
  }
  __syncthreads();

  // Merge the warps. Some warp saw a key (every partition the grid runs past the early return
  // holds one: the first spans the window's first key, at most kWindowAlign - 1 tokens in, and
  // partition sizes are >= 64), so the max is finite and the sum >= 1.
  for (int i = tid; i < tile_heads * head_dim; i += kT) {
    const int h = i / head_dim, d = i % head_dim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kW; ++w) m = fmaxf(m, part_max[w * kHeadTile + h]);
    float sum = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kW; ++w) {
      const float weight = rescale(part_max[w * kHeadTile + h], m);
      sum += part_sum[w * kHeadTile + h] * weight;
      o += part_acc[(w * kHeadTile + h) * kHeadDim + d] * weight;
    }
    o = o / sum * out_scale;
    if (partitioned) {
      const int64_t row =
          (seq * p.heads_q + first_head + h) * static_cast<int64_t>(ws.max_partitions) + part;
      ws.out[row * head_dim + d] = o;
      if (d == 0) {
        ws.max_logits[row] = m;
        ws.exp_sums[row] = sum;
      }
    } else {
      out[i] = from_float<T>(o);
    }
  }
}

// Grid (Hq, num_seqs). Combines v2's partitions: partition i's output counts with weight
// exp_sum_i * exp(max_i - max). Dynamic shared memory: one float per partition.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    paged_attention_reduce_kernel(PagedAttentionParams p, int partition_size,
                                  PartitionWorkspace ws) {
  extern __shared__ float weights[];
  __shared__ float red[2 * kWarps];
  const int head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int tid = threadIdx.x;
  const int64_t dim = p.kv.head_dim;
  const int context = p.kv.context_lens[seq];
  // The partitions the kernel ran, counted from the window's aligned start as it counts them.
  const int parts =
      (context - window_base(first_visible(context, p.window_left)) + partition_size - 1) /
      partition_size;
  T* out = static_cast<T*>(p.out) + (seq * p.heads_q + head) * dim;
  if (parts == 0) {
    for (int64_t d = tid; d < dim; d += kThreads) out[d] = from_float<T>(0.f);
    return;
  }
  const int64_t base = (seq * p.heads_q + head) * static_cast<int64_t>(ws.max_partitions);
  float m = -INFINITY;
  for (int i = tid; i < parts; i += kThreads) m = fmaxf(m, ws.max_logits[base + i]);
  m = block_max(m, red);
  float total = 0.f;
  for (int i = tid; i < parts; i += kThreads) {
    const float w = ws.exp_sums[base + i] * __expf(ws.max_logits[base + i] - m);
    weights[i] = w;
    total += w;
  }
  total = block_sum(total, red + kWarps);  // its barrier publishes `weights`
  const float inv_total = 1.f / total;
  for (int64_t d = tid; d < dim; d += kThreads) {
    float o = 0.f;
    for (int i = 0; i < parts; ++i) o += weights[i] * ws.out[(base + i) * dim + d];
    out[d] = from_float<T>(o * inv_total);
  }
}

// Launches v1 or v2 as `plan` says (paged_plan.h) for the sequences of `p` (at most
// plan.seqs_per_launch), v2 writing its partitions to `ws`, for queries of T and caches of C (T or
// an fp8 type); defined in paged_attention_<dtype>.cu and paged_attention_fp8*_<dtype>.cu. Throws on a
// launch error.
template <typename T, typename C>
void launch_paged_attention(const PagedAttentionParams& p, const DecodePlan& plan,
                            const PartitionWorkspace& ws, void* stream);

// Launches the fp8 tensor-core kernel (the plan's flash_fp8) for float16 or bfloat16 queries T
// and an fp8 cache of C (Fp8E4M3 or Fp8E5M2); defined in paged_fp8_mma_<dtype>.cu
// (paged_fp8_mma.cuh).
template <typename T, typename C>
void launch_fp8_mma(const PagedAttentionParams& p, const DecodePlan& plan,
                    const PartitionWorkspace& ws, void* stream);

}  // namespace djl_attn::paged::kernels
