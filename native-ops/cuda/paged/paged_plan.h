// The plans of the paged CUDA launchers: which kernel runs a problem, how it streams K/V, how the
// context is split, the grid and the scratch. Pure functions of the parameters the binding filled
// (src/paged/paged_params.h) and of the device's facts, so they compile without nvcc into
// libdjl_attn_plans.so and their tests (tests/test_plans_paged.py) run without a GPU. The
// launchers (paged_attention.cu, paged_prefill.cu, reshape_and_cache.cu) run what a plan says and
// decide nothing.
//
// Decode kernels (paged_attention):
//   flash  the tensor-core split-KV decode kernel of the flash family (cuda/flash/flash_decode.h):
//          the Hq / Hkv query heads of one kv head are the query rows of one m16 tile; the
//          sliding window and soft-cap in its features instantiation, ALiBi (slopes [Hq] or
//          [num_seqs, Hq]) in its ALiBi instantiation. This plan picks its
//          instantiation and key split too (flash_decode_params is the call it runs), so a call
//          is planned once.
//   v1     one thread block per (sequence, kv head, tile of kHeadTile query heads) over the whole
//          context (paged_attention_kernel.cuh).
//   v2     the same over partitions of the context, plus a reduce kernel.
//   flash_fp8  for fp8 caches: the tensor-core kernel of paged_fp8_mma.cuh (the flash kernel's
//          layout, fp8 fragments converted in registers), over the whole context or over v2's
//          partitions plus v2's reduce kernel.
//   rows   the warp-per-row kernel of paged_prefill_attention with one query row per sequence:
//          element loads, so it runs caches that are not 16-byte aligned (a view at an odd
//          offset) and head dims whose rows are not a whole number of 16-byte vectors (float16
//          D = 20, fp8 D = 40, ...), which the 16-byte loads and cp.async of the others cannot
//          read.
// A head dim between the compiled ones (kHeadDims) whose rows are whole vectors runs v1/v2 on
// the next compiled head dim, loading only its own vectors (the rest of the row stays zero) and
// storing only its own dims.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cuda/common/device_facts.h"
#include "cuda/flash/flash_plan.h"
#include "paged/paged_params.h"

namespace djl_attn::paged {

// Query heads of one kv head's GQA group that a v1/v2 thread block serves from one read of K/V.
constexpr int kHeadTile = 4;
// Tokens per v2 partition before the plan shortens it (down to kMinPartitionSize) for small
// grids: a multiple of every block size and of 4 warps' cache blocks of the largest size, so a
// partition's warps share evenly. DJL_ATTN_PAGED_PARTITION changes the start (benchmarks).
constexpr int kPartitionSize = 512;
// v1/v2 and flash_fp8 with a sliding window start a sequence at its window's first key aligned
// down to this many tokens (a multiple of every block size, of v1/v2's run-time step and of the
// fp8 tensor-core kernel's 64-key tiles): its span is then at most window_left + kWindowAlign
// tokens, which sizes the partitions.
constexpr int kWindowAlign = 64;
// Threads of a reshape_and_cache block (one block per token).
constexpr int kCacheThreads = 128;
// Warps of a paged_prefill_attention block (one warp per query row).
constexpr int kPrefillWarps = 4;
// CUDA's grid limits: x, and y and z.
constexpr int64_t kMaxGridX = 0x7fffffffLL;
constexpr int64_t kMaxGridYZ = 65535;

// DJL_ATTN_PAGED_KERNEL: the decode kernel a test or benchmark forces, or kAuto.
enum class DecodeRequest { kAuto, kV1, kV2, kFlash };

// DJL_ATTN_PAGED_CONFIG: how v1/v2 stream K/V (KernelConfig in paged_attention_kernel.cuh), as
// X(enumerator, switch value). kDefault streams through registers; kSmem4 through a cp.async ring
// in shared memory; the others are tuning variants compiled in DJL_ATTN_TUNING builds only
// (paged_attention_launch.cuh). A build without DJL_ATTN_TUNING has no enumerator for them, so
// neither its plan nor its launcher (whose switch names every enumerator) can meet one.
// libdjl_attn_plans.so is built with every enumerator.
#if defined(DJL_ATTN_TUNING)
#define DJL_PAGED_TUNING_STREAM_CONFIGS(X) \
  X(kW8L2, "w8l2") X(kSmem8, "smem8") X(kPf, "pf") X(kW8L2Pf, "w8l2pf")
#else
#define DJL_PAGED_TUNING_STREAM_CONFIGS(X)
#endif
#define DJL_PAGED_STREAM_CONFIGS(X) \
  X(kDefault, "default") X(kSmem4, "smem4") DJL_PAGED_TUNING_STREAM_CONFIGS(X)
enum class StreamConfig {
#define DJL_PAGED_STREAM_ENUMERATOR_(e, name) e,
  DJL_PAGED_STREAM_CONFIGS(DJL_PAGED_STREAM_ENUMERATOR_)
#undef DJL_PAGED_STREAM_ENUMERATOR_
};

enum class DecodeKernel { kFlash, kV1, kV2, kRows, kFlashFp8 };

// The head dims of the fp8 tensor-core kernel (fp8_mma_head_dim) as the plan names them to its
// launcher (paged_fp8_mma.cuh), which then has none to refuse.
enum class Fp8MmaHeadDim { k64 = 64, k128 = 128, k256 = 256 };

// The head dims and block sizes v1/v2 are compiled for (the lists of src/paged/paged_params.h)
// as the plan names them to their launcher (paged_attention_launch.cuh), which then has none to
// refuse. The value is the head dim or block size.
enum class PagedHeadDim {
#define DJL_PAGED_ENUMERATOR_(n) k##n = n,
  DJL_PAGED_FOR_EACH_HEAD_DIM(DJL_PAGED_ENUMERATOR_)
};
enum class PagedBlockSize { DJL_PAGED_FOR_EACH_BLOCK_SIZE(DJL_PAGED_ENUMERATOR_) };
#undef DJL_PAGED_ENUMERATOR_

// What the switches ask of the decode launcher.
struct DecodeOptions {
  DecodeRequest kernel = DecodeRequest::kAuto;
  StreamConfig config = StreamConfig::kSmem4;
  int64_t partition_size = kPartitionSize;  // v2's starting partition length, tokens

  bool operator==(const DecodeOptions& o) const {
    return kernel == o.kernel && config == o.config && partition_size == o.partition_size;
  }
};

// Everything of a paged_attention call that its plan reads: the parameters without their
// addresses, which enter only through their alignment. The plan is a function of this alone, so
// the launcher can key plans on it (the layers of one decode step give equal problems: one plan
// per step, paged_attention.cu) and nothing is ever read back from the device to plan.
struct DecodeProblem {
  ElementType dtype;        // of query and output
  CacheType cache_type;
  int64_t num_seqs;
  int64_t heads_q, heads_kv, head_dim;
  int64_t block_size;
  int64_t max_context_len;  // sizes the grid: an upper bound of every context length
  int64_t q_seq_stride, q_head_stride;  // elements
  int64_t window_left;      // as the operator takes it (-1: unbounded)
  float scale, softcap;
  bool alibi;               // slopes given
  bool caches_aligned16;    // both caches start on a 16-byte boundary
  bool io_aligned16;        // query and output start on a 16-byte boundary

  bool operator==(const DecodeProblem& o) const {
    return dtype == o.dtype && cache_type == o.cache_type && num_seqs == o.num_seqs &&
           heads_q == o.heads_q && heads_kv == o.heads_kv && head_dim == o.head_dim &&
           block_size == o.block_size && max_context_len == o.max_context_len &&
           q_seq_stride == o.q_seq_stride && q_head_stride == o.q_head_stride &&
           window_left == o.window_left && scale == o.scale && softcap == o.softcap &&
           alibi == o.alibi && caches_aligned16 == o.caches_aligned16 &&
           io_aligned16 == o.io_aligned16;
  }
};

DecodeProblem decode_problem(const PagedAttentionParams& p);

struct DecodePlan {
  DecodeKernel kernel;
  StreamConfig config;      // v1/v2: what runs (kDefault where the asked one has no kernel)
  PagedHeadDim kernel_head_dim = PagedHeadDim::k64;  // v1/v2: the compiled head dim that runs
                                                     // the call (its own, or padded_head_dim)
  PagedBlockSize block_size = PagedBlockSize::k16;   // v1/v2 unless run_time_block_size
  int padded_head_dim;      // v1/v2: the compiled head dim (kHeadDims) that runs a call whose
                            // head dim has no kernel of its own; 0 when it has one
  int head_tiles;           // v1/v2: tiles of kHeadTile query heads per kv head (grid x / Hkv)
  bool run_time_block_size;  // v1/v2: the kernel takes the block size as a value
                             // (block_size_at_run_time)
  int partition_size;       // v2, flash_fp8: tokens per partition; 0 for one pass
  int partitions;           // v2, flash_fp8: partitions of the longest context (grid z); 1 for
                            // one pass
  int64_t seqs_per_launch;  // sequences of one launch (grid y of v1/v2, batch of flash); the
                            // launcher runs the batch in slices of this many
  int64_t workspace_floats;  // v2, flash_fp8 with partitions: float32 scratch of one launch
                             // ([seqs, Hq, partitions] maxima and sums, [seqs, Hq, partitions,
                             // D] outputs); 0 otherwise
  Fp8MmaHeadDim fp8_head_dim = Fp8MmaHeadDim::k64;  // kFlashFp8: its instantiation
  flash::DecodeKernel flash;  // kFlash: the flash decode instantiation (paged rows)
  flash::KeySplit split;      // kFlash: its key split for a launch of seqs_per_launch sequences
};

// Resident blocks per SM of a flash decode instantiation on the device (the CUDA occupancy
// API's answer): the launcher asks the device, tests describe one.
using DecodeResidency = std::function<int(const flash::DecodeKernel&)>;

// Whether the shared-memory and tuning configurations exist for this dtype, cache and head dim
// (float16/bfloat16 caches, D = 64 and 128): paged_attention_launch.cuh instantiates them where
// this says so, and the plan asks for them only there. smem4 was measured on float16 caches
// only; fp8 caches (whose v1/v2 run only what the fp8 tensor-core kernel does not) have the
// register default, which saves 6 of the 21 fp8 kernels of each half-precision query dtype.
constexpr bool has_stream_configs(ElementType dtype, CacheType cache, int64_t head_dim) {
  return dtype != ElementType::kFloat32 && cache == CacheType::kQuery &&
         (head_dim == 64 || head_dim == 128);
}

// Whether v1/v2 take the cache's block size at run time (one kernel per head dim for every
// block size, paged_attention_kernel.cuh: kRunTimeBlockSize) rather than as a template argument
// (one kernel per block size): fp8 caches, whose v1/v2 run only what the fp8 tensor-core kernel
// does not, so that their 3 dtypes x 5 head dims are not compiled 3 times more.
constexpr bool block_size_at_run_time(CacheType cache) { return is_fp8(cache); }

// The head dims of the fp8 tensor-core kernel (paged_fp8_mma.cuh: whole 32-dim blocks of V, as
// the flash decode kernel's 64, 128, 256).
constexpr bool fp8_mma_head_dim(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// The fp8 tensor-core kernel's dynamic shared memory (Fp8MmaTile<D>::kSmemBytes, which
// static_asserts this): per warp a ring of K and V tiles of 16 rows of D + 16 bytes, 4 deep (3 at
// D = 256). 104 KiB at D = 256: more than the 99 KiB a block may opt into on sm_86/sm_89.
constexpr int fp8_mma_smem_bytes(int64_t head_dim) {
  return static_cast<int>(2 * 4 * (head_dim <= 128 ? 4 : 3) * 16 * (head_dim + 16));
}

// The flash decode kernel's own rules (which head dims, what device, how many query rows) come
// from the flash family's plan (cuda/flash/flash_plan.h: decode_runs_on, decode::kMaxRows).
DecodePlan plan_paged_attention(const DecodeProblem& p, const DecodeOptions& options,
                                const cuda::DeviceFacts& device,
                                const DecodeResidency& residency);

// The kFlash path's call as the flash decode kernel reads it, one query row of Hq heads per
// sequence folded into Hq / Hkv rows of Hkv heads (flash::fold_query_groups): the query
// [num_seqs, Hq, D] with its strides, keys and values at (t * Hkv + h) * D within a cache block
// (read through p.kv's block tables: no batch stride), out [num_seqs, Hq, D] contiguous, no
// logsumexp, kv_lens = context_lens, paged_attention's window (the query at position
// context_len - 1 sees keys >= position - window_left) normalised as flash_attention's, and its
// ALiBi slopes with sequence s as batch row s.
flash::FlashParams flash_decode_params(const PagedAttentionParams& p);

// "kernel=v2 config=smem4 head_tiles=1 partition_size=64 partitions=16 seqs_per_launch=1
// workspace_floats=..." (the fields that apply to the kernel).
std::string describe(const DecodePlan& plan);

// The switch values by name (the lists of the Option objects in paged_attention.cu); null for
// another name.
std::optional<DecodeRequest> decode_request_named(std::string_view name);
std::optional<StreamConfig> stream_config_named(std::string_view name);

// paged_prefill_attention: grid (row blocks of kPrefillWarps query rows, Hq, sequences), each
// dimension within CUDA's limit; the kernel strides over what the grid does not cover.
struct PrefillPlan {
  int64_t grid_x, grid_y, grid_z;  // grid_x 0: no query rows, nothing to launch
};

PrefillPlan plan_paged_prefill(const PagedPrefillParams& p);

// Elements an fp8 reshape_and_cache thread quantises and stores as one 8-byte word.
constexpr int kFp8Group = 8;

// reshape_and_cache: one block of kCacheThreads per token, launched in slices of `blocks` tokens
// (all of them in one launch below kMaxGridX), 16-byte copies when every row and pointer allows
// them; for an fp8 cache, vectorised means kFp8Group elements per thread and 8-byte stores.
struct CachePlan {
  bool vectorised;
  int64_t blocks;
};

CachePlan plan_reshape_and_cache(const ReshapeAndCacheParams& p);

std::string describe(const PrefillPlan& plan);
std::string describe(const CachePlan& plan);

}  // namespace djl_attn::paged
