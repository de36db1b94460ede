// The Hopper flash attention forward (sm_90a only; see flash_hopper.h and cuda/CMakeLists.txt).
//
// A persistent grid (one block per SM: a producer warpgroup and 2 or 3 consumer warpgroups,
// flash_shapes.h) works through block_m(consumers)-row query tiles of (batch, head) pairs, handed
// out longest first through a global counter:
// - warpgroup 0 is the producer: it gives registers away (setmaxnreg) and its first warp streams
//   each item's query tile and its key/value tiles through a 2-stage ring with TMA
//   (cp.async.bulk.tensor, 128-byte swizzle, one box per 64-column panel), each load completing
//   on a "full" mbarrier; it refills a buffer when every consumer has released it on its
//   "empty" mbarrier, and loads the next item's tiles while the consumers finish the last one.
// - warpgroups 1.. are the consumers (2 or 3 at D = 64, the plan's choice per call; 2 at D = 128
//   and 256), 64 query rows each, with the whole 64 x D float32
//   output accumulator and a 64 x 128 score tile in registers. S = Q K^T is one wgmma chain with
//   both operands in shared memory; O += P V takes P from registers (the score accumulator
//   layout is the A-fragment layout once packed to 16 bits) and V from shared memory read
//   MN-major, one 64-column panel per wgmma.
// - Within a consumer, S_{j+1} = Q K_{j+1}^T is issued before O += P_j V_j and waited for
//   first, so the softmax of tile j + 1 runs while the tensor cores do P_j V_j; between the
//   consumers, named barriers make them take turns issuing, round-robin (ping-pong with 2), so
//   that the others' softmax runs while one's products occupy the tensor cores.
// Keys past the valid length of a batch row (kv_lens) are masked to -inf; the value rows there
// are zero-filled (a probability of 0 times stale or NaN data would be NaN), which TMA cannot do
// inside a tensor: that one tile per row is loaded with cp.async by the producer warp instead.
// Rows past Sq or Sk are outside the tensor maps and arrive as zeros.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "common/tensor.h"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/mma.cuh"
#include "cuda/flash/hopper/flash_hopper.h"
#include "cuda/flash/hopper/flash_hopper_wgmma.cuh"

namespace djl_attn::flash::hopper {
namespace {

// The consumer count (a template parameter: 2 or 3 at D = 64, 2 at D = 128 and 256, the plan's
// choice per call), block_m(consumers) (64 query rows per consumer warpgroup) and block_n(D)
// (keys per tile: 128, or 64 at D = 256) are the plan's (flash_shapes.h).
constexpr int kStages = 2;
// A producer warpgroup and the consumers.
constexpr int threads(int consumers) { return 128 * (1 + consumers); }
// 128-byte swizzle atoms: a tile is stored as D / 64 column panels of [rows][64 elements].
constexpr int kPanelCols = 64;
constexpr int kRowBytes = kPanelCols * 2;
// Registers per thread after the split (setmaxnreg), within the SM's 64K. 2 consumers:
// 128 * 56 + 256 * 224 <= 64K (the producer spilled at 48, the consumers fit in 224 without
// spills). 3 consumers (D = 64): 128 * 32 + 384 * 160 = 64K, FlashAttention-3's split there; a
// D = 64 consumer holds a 32-register output accumulator, a 64-register score tile and 32 of P.
constexpr int producer_regs(int consumers) { return consumers == 3 ? 32 : 56; }
constexpr int consumer_regs(int consumers) { return consumers == 3 ? 160 : 224; }
static_assert(128 * producer_regs(2) + 128 * 2 * consumer_regs(2) <= 64 * 1024 &&
                  128 * producer_regs(3) + 128 * 3 * consumer_regs(3) <= 64 * 1024,
              "the register split must fit the SM's 64K registers");

template <int kHeadDim, int kConsumerCount>
struct Layout {
  static_assert(consumers_compiled(kHeadDim, kConsumerCount), "the plan's consumer counts");
  static constexpr int kConsumers = kConsumerCount;
  static constexpr int kBlockM = block_m(kConsumers);
  static constexpr int kBlockN = block_n(kHeadDim);
  static constexpr int kPanels = kHeadDim / kPanelCols;
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKvBytes = kBlockN * kHeadDim * 2;  // one K or V tile
  static constexpr int kQOff = 0;
  static constexpr int kKOff = kQBytes;
  static constexpr int kVOff = kKOff + kStages * kKvBytes;
  static constexpr int kBarOff = kVOff + kStages * kKvBytes;
  // q_full, q_empty, k_full[2], v_full[2], k_empty[2], v_empty[2], item_full[2], item_empty[2]
  static constexpr int kNumBars = 2 + 4 * kStages + 4;
  static constexpr int kItemOff = kBarOff + kNumBars * 8;  // int[2]: the next work items
  // Slack for aligning the dynamic buffer to the 1024 bytes a 128-byte swizzle atom needs.
  static constexpr int kSmemBytes = kItemOff + 2 * 4 + 1024;
  static_assert(kSmemBytes == smem_bytes(kHeadDim, kConsumers), "the plan's size (flash_shapes.h)");
};

struct HopperArgs {
  CUtensorMap q_map, k_map, v_map;  // 4-d maps over (D, S, H, B)
  FlashParams params;
  int m_blocks;     // query tiles per (batch, head)
  int total_items;  // m_blocks * B * Hq
  // Work items handed out so far beyond the first gridDim.x; zero at launch.
  int* item_counter;
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DJL_HOPPER_DEVICE_CODE 1
#endif

#ifdef DJL_HOPPER_DEVICE_CODE

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// One box of a 4-d tensor map into shared memory, completing `bar`'s transaction count.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle. K-major operands: 8-row groups 1024 bytes
// apart (stride offset), the leading offset unused. The MN-major V operand is only ever read one
// 64-column panel at a time, so its leading offset (the panel stride) is unused as well, and
// both offsets hold the 1024-byte stride between groups of 8 keys.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lead >> 4) << 16) | (static_cast<uint64_t>(stride >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Ties registers that an in-flight wgmma reads or writes to this point of the program, so that
// the compiler neither reads an accumulator before the wait nor reuses an operand register.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

using cuda::ptx::cp_async_16;
using cuda::ptx::cp_async_wait_all;
using cuda::ptx::fast_exp2;
using cuda::ptx::pack2;

// S (+)= Q K^T for one 16-column step: a 64 x kN score tile, kN / 2 floats per thread.
template <typename T, int kN>
__device__ __forceinline__ void mma_qk(float (&s)[kN / 2], uint64_t da, uint64_t db, int scale_d) {
  static_assert(kN == 64 || kN == 128, "the score tile widths of block_n");
  if constexpr (kN == 128) {
    if constexpr (std::is_same_v<T, __half>) {
      wgmma_ss_m64n128k16_f16(s, da, db, scale_d);
    } else {
      wgmma_ss_m64n128k16_bf16(s, da, db, scale_d);
    }
  } else {
    if constexpr (std::is_same_v<T, __half>) {
      wgmma_ss_m64n64k16_f16(s, da, db, scale_d);
    } else {
      wgmma_ss_m64n64k16_bf16(s, da, db, scale_d);
    }
  }
}
template <typename T>
__device__ __forceinline__ void mma_pv(float (&o)[32], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (std::is_same_v<T, __half>) {
    wgmma_rs_m64n64k16_f16(o, a, db, 1);
  } else {
    wgmma_rs_m64n64k16_bf16(o, a, db, 1);
  }
}

// Named barriers 1.. (0 is __syncthreads), one per consumer, order the consumers' GEMM issue:
// consumer c waits on barrier 1 + c, which the consumer before it arrives at, so each barrier
// counts two warpgroups.
__device__ __forceinline__ void named_bar_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

#endif  // DJL_HOPPER_DEVICE_CODE

// One unit of work: a block_m-row query tile of one (batch, head) and the key tiles it needs.
struct Work {
  int m0, b, h, h_kv, kv_len, diagonal, n_tiles;
};

template <int kBlockM, int kBlockN>
__device__ __forceinline__ Work work_item(const HopperArgs& args, int idx) {
  const FlashParams& p = args.params;
  Work w;
  // m tiles vary fastest (consecutive items read the same keys and values from L2), last tile
  // first: under a causal mask the last query tiles see the most keys, and handing out the
  // longest work first keeps the final round short.
  const int m_block = args.m_blocks - 1 - idx % args.m_blocks;
  const int bh = idx / args.m_blocks;
  w.b = bh / static_cast<int>(p.heads_q);
  w.h = bh % static_cast<int>(p.heads_q);
  w.h_kv = w.h / static_cast<int>(p.heads_q / p.heads_kv);
  w.m0 = m_block * kBlockM;
  // SeqExtent's batched rule (flash_params.h) written out: spelled through the helper, ptxas
  // reorders all 16 instantiations' machine code (sm_90a cubins compared), which this kernel's
  // measured schedule does not get without a GPU timing.
  const int seqlen_q = static_cast<int>(p.seqlen_q);
  const int seqlen_k = static_cast<int>(p.seqlen_k);
  int kv_len = p.kv_lens != nullptr ? p.kv_lens[w.b] : seqlen_k;
  w.kv_len = min(max(kv_len, 0), seqlen_k);
  w.diagonal = w.kv_len - seqlen_q;  // row i sees key j iff j <= i + diagonal
  int key_end = w.kv_len;
  if (p.causal) key_end = min(max(min(w.m0 + kBlockM, seqlen_q) + w.diagonal, 0), w.kv_len);
  w.n_tiles = (key_end + kBlockN - 1) / kBlockN;
  return w;
}

// kPingPong: the consumers take turns issuing their GEMMs, round-robin (named barriers), so that
// the others' softmax runs while one's products occupy the tensor cores, as FlashAttention-3
// does; without it they are coupled only through the load ring.
//
// Persistent: gridDim.x blocks (at most one per SM) each start on item blockIdx.x and then take
// the next unclaimed item from a global counter as their producer finishes issuing the loads of
// the current one. Items are ordered longest first within each (batch, head), so this greedy
// hand-out balances causal work, where a fixed stride of gridDim.x gave some blocks mostly long
// items and others mostly short ones. The producer passes each item index to the consumers
// through a 2-slot shared ring (item_full/item_empty); an index >= total_items ends the block.
// The load ring, the query buffer and the ping-pong turns carry over from one item to the next,
// so the producer loads the next item's query and first key tiles while the consumers finish
// and store the previous one.
template <typename T, int kHeadDim, int kConsumerCount, bool kPingPong>
__global__ void __launch_bounds__(threads(kConsumerCount), 1) flash_hopper_kernel(const __grid_constant__ HopperArgs args) {
#ifdef DJL_HOPPER_DEVICE_CODE
  using L = Layout<kHeadDim, kConsumerCount>;
  constexpr int kPanels = L::kPanels;
  constexpr int kConsumers = L::kConsumers;
  constexpr int kBlockM = L::kBlockM;
  constexpr int kBlockN = L::kBlockN;
  // Every "empty" barrier (query tile, key and value stages, work-item slots) takes one arrival
  // per consumer warp.
  constexpr uint32_t kConsumerWarps = 4 * kConsumers;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t q_s = base + L::kQOff;
  const uint32_t k_s = base + L::kKOff;
  const uint32_t v_s = base + L::kVOff;
  const uint32_t bars = base + L::kBarOff;
  const uint32_t q_full = bars;
  const uint32_t q_empty = bars + 8u;
  auto k_full = [&](int s) { return bars + 8u * (2 + s); };
  auto v_full = [&](int s) { return bars + 8u * (2 + kStages + s); };
  auto k_empty = [&](int s) { return bars + 8u * (2 + 2 * kStages + s); };
  auto v_empty = [&](int s) { return bars + 8u * (2 + 3 * kStages + s); };
  auto item_full = [&](int s) { return bars + 8u * (2 + 4 * kStages + s); };
  auto item_empty = [&](int s) { return bars + 8u * (4 + 4 * kStages + s); };
  volatile int* const items = reinterpret_cast<volatile int*>(smem_raw + (base - raw) + L::kItemOff);

  const FlashParams& p = args.params;
  const int total = args.total_items;
  const int seqlen_q = static_cast<int>(p.seqlen_q);
  const int seqlen_k = static_cast<int>(p.seqlen_k);

  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, kConsumerWarps);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), kConsumerWarps);
      mbar_init(v_empty(s), kConsumerWarps);
    }
    for (int s = 0; s < 2; ++s) {
      mbar_init(item_full(s), 1);
      mbar_init(item_empty(s), kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---- producer ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(producer_regs(kConsumers)));
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.q_map)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.k_map)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&args.v_map)) : "memory");
    }
    uint32_t q_uses = 0, kv_iter = 0, handed = 0;
    int idx = blockIdx.x;
    for (;; ++handed) {
      {
        const int slot = handed % 2;
        if (handed >= 2) mbar_wait(item_empty(slot), ((handed - 2) / 2) & 1);
        if (lane == 0) {
          items[slot] = idx;
          mbar_arrive(item_full(slot));
        }
      }
      if (idx >= total) break;
      const Work w = work_item<kBlockM, kBlockN>(args, idx);
      int next = 0;
      if (lane == 0) next = atomicAdd(args.item_counter, 1) + static_cast<int>(gridDim.x);
      idx = __shfl_sync(0xffffffffu, next, 0);
      if (w.n_tiles == 0) continue;  // the consumers write zeros and need no data
      if (q_uses > 0) mbar_wait(q_empty, (q_uses - 1) & 1);
      ++q_uses;
      if (lane == 0) {
        mbar_expect_tx(q_full, L::kQBytes);
        for (int pn = 0; pn < kPanels; ++pn) {
          tma_load_4d(q_s + pn * kBlockM * kRowBytes, &args.q_map, q_full, pn * kPanelCols, w.m0,
                      w.h, w.b);
        }
      }
      const T* v_rows =
          static_cast<const T*>(p.v) + w.b * p.v_batch_stride + w.h_kv * p.v_head_stride;
      for (int i = 0; i < w.n_tiles; ++i, ++kv_iter) {
        const int s = kv_iter % kStages;
        const uint32_t use = kv_iter / kStages;
        const int n0 = i * kBlockN;
        if (use > 0) mbar_wait(k_empty(s), (use - 1) & 1);
        if (lane == 0) {
          mbar_expect_tx(k_full(s), L::kKvBytes);
          for (int pn = 0; pn < kPanels; ++pn) {
            tma_load_4d(k_s + s * L::kKvBytes + pn * kBlockN * kRowBytes, &args.k_map, k_full(s),
                        pn * kPanelCols, n0, w.h_kv, w.b);
          }
        }
        if (use > 0) mbar_wait(v_empty(s), (use - 1) & 1);
        if (n0 + kBlockN > w.kv_len && w.kv_len < seqlen_k) {
          // The tile that holds this row's last valid key, with real rows of the tensor after
          // it: zero-filled past the valid keys with cp.async, which TMA cannot do there.
          const uint32_t dst = v_s + s * L::kKvBytes;
          constexpr int kChunks = kBlockN * kHeadDim / 8;
          // Rolled up with 3 consumers: unrolled (4 times, nvcc's own choice, kept for 2) it
          // spilled 64 bytes in the producer's 32 registers.
#pragma unroll(kConsumers == 3 ? 1 : 4)
          for (int c_idx = lane; c_idx < kChunks; c_idx += 32) {
            const int r = c_idx / (kHeadDim / 8);
            const int c = c_idx % (kHeadDim / 8);
            const bool ok = n0 + r < w.kv_len;
            const T* src = ok ? v_rows + (n0 + r) * p.v_seq_stride + c * 8 : v_rows;
            const uint32_t to = dst + (c / 8) * kBlockN * kRowBytes + r * kRowBytes +
                                (((c % 8) ^ (r % 8)) * 16);
            cp_async_16(to, src, ok ? 16 : 0);
          }
          cp_async_wait_all();
          // The consumers read this tile through the async proxy (wgmma).
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
          __syncwarp();
          if (lane == 0) mbar_arrive(v_full(s));
        } else if (lane == 0) {
          mbar_expect_tx(v_full(s), L::kKvBytes);
          for (int pn = 0; pn < kPanels; ++pn) {
            tma_load_4d(v_s + s * L::kKvBytes + pn * kBlockN * kRowBytes, &args.v_map, v_full(s),
                        pn * kPanelCols, n0, w.h_kv, w.b);
          }
        }
      }
    }
    return;
  }

  // ---- consumers ----
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_regs(kConsumers)));
  const int cw = warpgroup - 1;             // which 64 rows of the tile
  const int wtid = threadIdx.x % 128;
  const int warp = wtid / 32, lane = wtid % 32;
  const int g = lane / 4, t = lane % 4;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const uint32_t q_rows = q_s + cw * 64 * kRowBytes;
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  // Turns: every batch of GEMMs a consumer issues (S_0; S_i with P_{i-1} V_{i-1}; the last P V)
  // sits between a wait for its turn and a hand-over to the next consumer, cw + 1 mod
  // kConsumers, over all of the block's items (every consumer takes the same number of turns:
  // they all work on the same items). Consumer 0 goes first on the last consumer's initial
  // hand-over, and takes the last consumer's final hand-over after its loop, so that every
  // arrival meets a wait. A consumer cannot arrive twice at a barrier before its waiter has
  // passed: its next hand-over needs its own next turn, which comes round only through that
  // waiter.
  auto my_turn = [&]() {
    if constexpr (kPingPong) named_bar_sync(1 + cw);
  };
  // The next consumer's barrier is 1 + (cw + 1) % kConsumers, spelled 2 - cw for two consumers:
  // the select costs D = 128 and 256 eight instructions over the 2-consumer kernel's code.
  auto hand_over = [&]() {
    if constexpr (kPingPong) {
      named_bar_arrive(kConsumers == 2 ? 2 - cw : (cw == kConsumers - 1 ? 1 : 2 + cw));
    }
  };
  if constexpr (kPingPong) {
    if (cw == kConsumers - 1) named_bar_arrive(1);
  }

  uint32_t q_uses = 0, kv_iter = 0;
  for (uint32_t taken = 0;; ++taken) {
    const int slot = taken % 2;
    mbar_wait(item_full(slot), (taken / 2) & 1);
    const int idx = items[slot];
    __syncwarp();
    release(item_empty(slot));
    if (idx >= total) break;
    const Work w = work_item<kBlockM, kBlockN>(args, idx);
    const int row_base = w.m0 + cw * 64 + warp * 16 + g;  // rows row_base and row_base + 8
    float o[kPanels][32];
#pragma unroll
    for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
      for (int e = 0; e < 32; ++e) o[pn][e] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.f, 0.f};

    if (w.n_tiles > 0) {
      float s_acc[kBlockN / 2];
      uint32_t p_frag[kBlockN / 16][4];
      float corr[2];
      auto stage = [&](int i) { return static_cast<int>((kv_iter + i) % kStages); };
      auto parity = [&](int i) { return ((kv_iter + i) / kStages) & 1u; };

      auto issue_qk = [&](int st) {
        const uint32_t k_tile = k_s + st * L::kKvBytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk) {
          const uint32_t panel = kk / 4, within = (kk % 4) * 32;
          const uint64_t da = smem_desc(q_rows + panel * kBlockM * kRowBytes + within, 16, 1024);
          const uint64_t db = smem_desc(k_tile + panel * kBlockN * kRowBytes + within, 16, 1024);
          mma_qk<T, kBlockN>(s_acc, da, db, kk > 0 ? 1 : 0);
        }
        wgmma_commit();
      };
      auto issue_pv = [&](int st) {
        const uint32_t v_tile = v_s + st * L::kKvBytes;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn) {
            const uint64_t db =
                smem_desc(v_tile + pn * kBlockN * kRowBytes + kk * 16 * kRowBytes, 1024, 1024);
            mma_pv<T>(o[pn], p_frag[kk], db);
          }
        wgmma_commit();
      };
      // Masks tile i's scores, updates the running max and sum, and turns the scores into
      // probabilities in place; corr[] is what the output accumulated so far must be scaled by.
      auto softmax = [&](int i) {
        const int n0 = i * kBlockN;
        const bool need_mask = n0 + kBlockN > w.kv_len ||
                               (p.causal && n0 + kBlockN - 1 > w.m0 + cw * 64 + w.diagonal);
        if (need_mask) {
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int row = row_base + (e >= 2 ? 8 : 0);
              const int col = n0 + j * 8 + 2 * t + (e & 1);
              if (col >= w.kv_len || (p.causal && col > row + w.diagonal)) {
                s_acc[4 * j + e] = -INFINITY;
              }
            }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float mx = -INFINITY;
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j) {
            mx = fmaxf(mx, fmaxf(s_acc[4 * j + 2 * hf], s_acc[4 * j + 2 * hf + 1]));
          }
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // scale > 0 (the launcher checks), so the maximum of the raw scores scales to the
          // maximum of the scaled ones, and -inf stays -inf.
          mx = fmaxf(row_max[hf], mx * scale_log2);
          const float base_v = mx == -INFINITY ? 0.f : mx;
          corr[hf] = fast_exp2(row_max[hf] - base_v);
          row_max[hf] = mx;
          float sum = row_sum[hf] * corr[hf];
#pragma unroll
          for (int j = 0; j < kBlockN / 8; ++j) {
            const float p0 = fast_exp2(fmaf(s_acc[4 * j + 2 * hf], scale_log2, -base_v));
            const float p1 = fast_exp2(fmaf(s_acc[4 * j + 2 * hf + 1], scale_log2, -base_v));
            s_acc[4 * j + 2 * hf] = p0;
            s_acc[4 * j + 2 * hf + 1] = p1;
            sum += p0 + p1;
          }
          row_sum[hf] = sum;
        }
      };
      auto pack_p = [&]() {
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
          p_frag[kk][0] = pack2<T>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);
          p_frag[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);
          p_frag[kk][2] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);
          p_frag[kk][3] = pack2<T>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);
        }
      };

      mbar_wait(q_full, q_uses & 1);
      mbar_wait(k_full(stage(0)), parity(0));
      my_turn();
      issue_qk(stage(0));
      hand_over();
      wgmma_wait<0>();
      fence_regs(s_acc);
      release(k_empty(stage(0)));
      if (w.n_tiles == 1) release(q_empty);  // the item's last read of its query tile
      softmax(0);
      pack_p();
      for (int i = 1; i < w.n_tiles; ++i) {
        mbar_wait(k_full(stage(i)), parity(i));
        mbar_wait(v_full(stage(i - 1)), parity(i - 1));
        my_turn();
        issue_qk(stage(i));
        issue_pv(stage(i - 1));
        hand_over();
        wgmma_wait<1>();  // S_i is done; P_{i-1} V_{i-1} may still run
        fence_regs(s_acc);
        release(k_empty(stage(i)));
        if (i == w.n_tiles - 1) release(q_empty);
        softmax(i);
        wgmma_wait<0>();
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) fence_regs(o[pn]);
        fence_regs(p_frag);
        release(v_empty(stage(i - 1)));
        // Once the row maxima settle most tiles leave them unchanged (corr == 1): the warp
        // skips the rescale then. The vote keeps the branch warp-uniform.
        if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              o[pn][4 * j + 0] *= corr[0];
              o[pn][4 * j + 1] *= corr[0];
              o[pn][4 * j + 2] *= corr[1];
              o[pn][4 * j + 3] *= corr[1];
            }
        }
        pack_p();
      }
      {
        const int last = w.n_tiles - 1;
        mbar_wait(v_full(stage(last)), parity(last));
        my_turn();
        issue_pv(stage(last));
        hand_over();
        wgmma_wait<0>();
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) fence_regs(o[pn]);
        fence_regs(p_frag);
        release(v_empty(stage(last)));
      }
      ++q_uses;
      kv_iter += w.n_tiles;
    }

    // Epilogue: divide by the row sums once, write the output and the logsumexp.
    T* const out = static_cast<T*>(p.out) + w.b * p.out_batch_stride + w.h * p.out_head_stride;
    float* const lse = p.lse + lse_offset(p, w.b, w.h);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = row_sum[hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = row_base + hf * 8;
      if (row >= seqlen_q) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      T* const o_row = out + static_cast<int64_t>(row) * p.out_seq_stride;
#pragma unroll
      for (int pn = 0; pn < kPanels; ++pn)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int col = pn * kPanelCols + j * 8 + 2 * t;
          *reinterpret_cast<uint32_t*>(o_row + col) =
              pack2<T>(o[pn][4 * j + 2 * hf] * inv, o[pn][4 * j + 2 * hf + 1] * inv);
        }
      if (t == 0) {
        lse[row] = sum > 0.f ? (row_max[hf] + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
      }
    }
  }
  if constexpr (kPingPong) {
    if (cw == 0) named_bar_sync(1);  // the last consumer's final hand-over
  }
#endif  // DJL_HOPPER_DEVICE_CODE
}

// ---- host side ---------------------------------------------------------------------------------

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver the runtime already loaded (the library links no
// libcuda), or null when the driver does not have it.
EncodeTiled encode_fn() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A map over one [B, S, H, D] operand whose boxes are 64 columns x `rows` rows of one (batch,
// head), 128-byte swizzled; rows past S read as zeros. The plan checked the strides against
// TMA's rules (tma_strides in flash_plan.cpp); false when the driver refuses anyway.
bool make_map(CUtensorMap* map, const FlashParams& p, const void* ptr, int64_t seqlen,
              int64_t heads, int64_t batch_stride, int64_t seq_stride, int64_t head_stride,
              int rows) {
  const EncodeTiled encode = encode_fn();
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(seqlen),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(seq_stride) * 2,
                                 static_cast<cuuint64_t>(head_stride) * 2,
                                 static_cast<cuuint64_t>(batch_stride) * 2};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kPanelCols), static_cast<cuuint32_t>(rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = p.dtype == ElementType::kFloat16
                                       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(map, type, 4, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, int kHeadDim, int kConsumers, bool kPingPong>
void prepare(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];
  if (device >= 0 && device < kMaxDevices && done[device].load()) return;
  DJL_ATTN_CUDA_CHECK(
      cudaFuncSetAttribute(flash_hopper_kernel<T, kHeadDim, kConsumers, kPingPong>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Layout<kHeadDim, kConsumers>::kSmemBytes));
  if (device >= 0 && device < kMaxDevices) done[device].store(true);
}

template <typename T, int kHeadDim, int kConsumers, bool kPingPong>
void launch_one(const HopperArgs& args, int grid, cudaStream_t stream, int device) {
  prepare<T, kHeadDim, kConsumers, kPingPong>(device);
  flash_hopper_kernel<T, kHeadDim, kConsumers, kPingPong>
      <<<static_cast<unsigned>(grid), threads(kConsumers), Layout<kHeadDim, kConsumers>::kSmemBytes,
         stream>>>(args);
  DJL_ATTN_CUDA_CHECK_LAUNCH("flash_hopper_kernel");
}

template <typename T, int kHeadDim, int kConsumers>
void launch(HopperArgs& args, const FlashPlan& plan, cudaStream_t stream, int device) {
  // The work-item counter: scratch from PyTorch's caching allocator, zeroed on the stream. Freed
  // on return, which stream order makes safe (the allocator hands it to later work on this
  // stream only).
  Tensor counter = Tensor::empty({1}, DType::kInt32, Device{DeviceType::kCuda, device});
  args.item_counter = counter.data_as<int>();
  DJL_ATTN_CUDA_CHECK(cudaMemsetAsync(args.item_counter, 0, sizeof(int), stream));
  if (plan.hopper.ping_pong) {
    launch_one<T, kHeadDim, kConsumers, true>(args, plan.hopper_grid, stream, device);
  } else {
    launch_one<T, kHeadDim, kConsumers, false>(args, plan.hopper_grid, stream, device);
  }
}

// The instantiations the plan may choose (hopper::consumers_compiled): D = 64 with 2 or 3
// consumers, D = 128 and 256 with 2.
template <typename T>
void launch_for(HopperArgs& args, const FlashPlan& plan, cudaStream_t stream, int device) {
  const HopperKernel& kernel = plan.hopper;
  if (kernel.head_dim == 64 && kernel.consumers == 3) {
    launch<T, 64, 3>(args, plan, stream, device);
  } else if (kernel.head_dim == 64 && kernel.consumers == 2) {
    launch<T, 64, 2>(args, plan, stream, device);
  } else if (kernel.head_dim == 128 && kernel.consumers == 2) {
    launch<T, 128, 2>(args, plan, stream, device);
  } else if (kernel.head_dim == 256 && kernel.consumers == 2) {
    launch<T, 256, 2>(args, plan, stream, device);
  } else {
    fail_native("flash_attention: the Hopper kernel has no head dim ", kernel.head_dim, " with ",
                kernel.consumers, " consumer warpgroups; the plan should not have chosen it");
  }
}

}  // namespace

void run(const FlashParams& p, const FlashPlan& plan, cudaStream_t stream, int device) {
  HopperArgs args{};
  args.params = p;
  args.m_blocks = plan.m_blocks;
  args.total_items = plan.hopper_items;
  // The plan checked what the tensor maps need (strides, alignment, sizes): an encoding that
  // fails anyway is a driver problem, not a caller's.
  if (encode_fn() == nullptr) {
    fail_native("flash_attention: the CUDA driver has no cuTensorMapEncodeTiled (needed by the "
                "Hopper kernel; DJL_ATTN_FLASH_HOPPER=off avoids it)");
  }
  if (!make_map(&args.q_map, p, p.q, p.seqlen_q, p.heads_q, p.q_batch_stride, p.q_seq_stride,
                p.q_head_stride, block_m(plan.hopper.consumers)) ||
      !make_map(&args.k_map, p, p.k, p.seqlen_k, p.heads_kv, p.k_batch_stride, p.k_seq_stride,
                p.k_head_stride, block_n(p.head_dim)) ||
      !make_map(&args.v_map, p, p.v, p.seqlen_k, p.heads_kv, p.v_batch_stride, p.v_seq_stride,
                p.v_head_stride, block_n(p.head_dim))) {
    fail_native("flash_attention: cuTensorMapEncodeTiled refused a tensor map the plan accepted");
  }
  if (plan.hopper.dtype == ElementType::kFloat16) {
    launch_for<__half>(args, plan, stream, device);
  } else {
    launch_for<__nv_bfloat16>(args, plan, stream, device);
  }
}

}  // namespace djl_attn::flash::hopper
