#include "cuda/paged/paged_plan.h"

#include <algorithm>

#include "common/alignment.h"
#include "cuda/flash/flash_plan.h"
#include "cuda/flash/flash_shapes.h"

namespace djl_attn::paged {
namespace {

// Thread blocks per SM wanted in a v1/v2 grid (3 are resident at a time, kMinBlocksPerSm of
// paged_attention_kernel.cuh): below this many, v2 splits the context further, so that every SM
// has blocks and the last wave is short.
constexpr int64_t kBlocksPerSm = 4;
// v1 stays the automatic choice, when the grid is full without splitting, up to this context:
// longer streams per block make the last wave's imbalance costlier than v2's reduce pass.
constexpr int64_t kV1MaxAutoContext = 2048;
// The reduce kernel keeps one weight per partition in shared memory: 32 KiB at most, under the
// 48 KiB a kernel gets without opting in.
constexpr int64_t kMaxPartitions = 8192;
// v2's shortest partition: 4 cache blocks of 16 tokens, one per warp (2 of 32 tokens).
constexpr int64_t kMinPartitionSize = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The longest span of keys v1/v2 and flash_fp8 walk for one sequence: the context, or with a
// window its first visible key aligned down to kWindowAlign up to the query (at most
// window_left + kWindowAlign tokens).
int64_t walked_context(const DecodeProblem& p) {
  if (p.window_left < 0 || p.window_left >= p.max_context_len) return p.max_context_len;
  return std::min(p.max_context_len, p.window_left + kWindowAlign);
}

// The flash decode kernel's table lookups assume a warp's 16 key rows span at most two cache
// blocks: power-of-two block sizes of at least 8 (every supported one, kBlockSizes).
constexpr bool is_power_of_two_at_least_8(int64_t b) { return b >= 8 && (b & (b - 1)) == 0; }
static_assert([] {
  for (int b : kBlockSizes) {
    if (!is_power_of_two_at_least_8(b)) return false;
  }
  return true;
}(), "every supported block size runs the flash decode kernel's table lookups");

// flash_decode_params without the addresses: what the flash plan functions read.
flash::FlashParams folded_call(const DecodeProblem& p) {
  flash::FlashParams f{};
  f.q_seq_stride = p.q_seq_stride;
  f.q_head_stride = p.q_head_stride;
  f.k_seq_stride = f.v_seq_stride = p.heads_kv * p.head_dim;
  f.k_head_stride = f.v_head_stride = p.head_dim;
  f.out_seq_stride = p.heads_q * p.head_dim;
  f.out_head_stride = p.head_dim;
  f.out_batch_stride = p.heads_q * p.head_dim;
  f.q_batch_stride = p.q_seq_stride;
  f.batch = p.num_seqs;
  f.seqlen_q = 1;
  f.seqlen_k = p.max_context_len;
  f.heads_q = p.heads_q;
  f.heads_kv = p.heads_kv;
  f.head_dim = p.head_dim;
  f.scale = p.scale;
  f.causal = false;
  f.dtype = p.dtype;
  flash::set_window(f, p.window_left, /*window_right=*/-1);
  f.softcap = p.softcap;
  return flash::fold_query_groups(f);
}

// Whether the flash decode kernel runs this call: float16/bfloat16 caches of the query's dtype
// (it has no fp8 loads: an fp8 cache runs v1/v2), a head dim it has on this device, a GQA group
// that fits its query rows, and 16-byte aligned query rows and output (its loads and stores are
// 16-byte vectors). The sliding window and soft-cap run in its features instantiation, which
// starts each sequence at its window's first tile and splits only the window's span
// (flash::decode_walked_keys), ALiBi in its ALiBi instantiation (each folded row, a query head,
// reads its own slope of its sequence's row).
bool flash_runs(const DecodeProblem& p, const cuda::DeviceFacts& device) {
  return p.dtype != ElementType::kFloat32 && p.cache_type == CacheType::kQuery &&
         flash::decode_runs_on(p.head_dim, device) &&
         p.heads_q / p.heads_kv <= flash::decode::kMaxRows && p.io_aligned16 &&
         p.q_seq_stride % 8 == 0 && p.q_head_stride % 8 == 0 &&
         is_power_of_two_at_least_8(p.block_size);
}

// Whether the fp8 tensor-core kernel runs this call: an fp8 cache read by float16/bfloat16
// queries, a head dim it has, no ALiBi (the window and soft-cap it has), a GQA group that fits
// its 16 query rows, mma.sync f16/bf16 (sm_80+) and its shared memory (not D = 256 on
// sm_86/sm_89's 99 KiB: v1/v2 there).
bool flash_fp8_runs(const DecodeProblem& p, const cuda::DeviceFacts& device) {
  return is_fp8(p.cache_type) && p.dtype != ElementType::kFloat32 &&
         fp8_mma_head_dim(p.head_dim) && !p.alibi &&
         p.heads_q / p.heads_kv <= 16 && device.cc_major >= 8 &&
         device.smem_optin >= fp8_mma_smem_bytes(p.head_dim);
}

// v2's partitions of the context for a grid of `base_blocks` thread blocks per partition:
// base_partition tokens (doubled while there would be more than kMaxPartitions), halved down to
// kMinPartitionSize while the grid has fewer than `wanted` blocks.
struct Split {
  int64_t partition_size, partitions;
};

Split split_context(int64_t max_context, int64_t base_partition, int64_t base_blocks,
                    int64_t wanted) {
  int64_t partition_size = base_partition;
  while (ceil_div(max_context, partition_size) > kMaxPartitions) partition_size *= 2;
  // Few sequences and heads: shorter partitions, so that the grid still fills the GPU
  // (batch 1, 8 kv heads, 1k context: 16 thread blocks at 512 tokens, 128 at 64).
  int64_t split = std::max<int64_t>(ceil_div(max_context, partition_size), 1);
  while (partition_size > kMinPartitionSize && base_blocks * split < wanted &&
         2 * split <= kMaxPartitions) {
    partition_size /= 2;
    split = std::max<int64_t>(ceil_div(max_context, partition_size), 1);
  }
  return {partition_size, split};
}

// The block size's v1/v2 instantiation, or none off the list (which the bindings refuse).
std::optional<PagedBlockSize> compiled_block_size(int64_t block_size) {
#define DJL_PAGED_BLOCK_SIZE_CASE_(b) \
  if (block_size == b) return PagedBlockSize::k##b;
  DJL_PAGED_FOR_EACH_BLOCK_SIZE(DJL_PAGED_BLOCK_SIZE_CASE_)
#undef DJL_PAGED_BLOCK_SIZE_CASE_
  return std::nullopt;
}

const char* stream_config_name(StreamConfig config) {
  switch (config) {
#define DJL_PAGED_STREAM_NAME_(e, name) \
  case StreamConfig::e: return name;
    DJL_PAGED_STREAM_CONFIGS(DJL_PAGED_STREAM_NAME_)
#undef DJL_PAGED_STREAM_NAME_
  }
  return "?";
}

}  // namespace

DecodePlan plan_paged_attention(const DecodeProblem& p, const DecodeOptions& options,
                                const cuda::DeviceFacts& device,
                                const DecodeResidency& residency) {
  DecodePlan plan{};
  plan.config = StreamConfig::kDefault;
  plan.head_tiles = 1;
  plan.partitions = 1;
  plan.seqs_per_launch = p.num_seqs;
  // Every kernel but `rows` reads the caches in 16-byte vectors: rows of a whole number of them
  // and aligned base addresses.
  const int64_t cache_element = is_fp8(p.cache_type) ? 1 : element_size(p.dtype);
  if ((p.head_dim * cache_element) % 16 != 0 || !p.caches_aligned16) {
    plan.kernel = DecodeKernel::kRows;
    return plan;
  }
  const int64_t wanted = kBlocksPerSm * device.sm_count;
  // A forced flash that cannot run this call runs what auto would choose between v1 and v2.
  if (options.kernel != DecodeRequest::kV1 && options.kernel != DecodeRequest::kV2 &&
      flash_fp8_runs(p, device)) {
    // One block per (sequence, kv head) and partition: v2's partitions, and one pass where they
    // come to a single one.
    plan.kernel = DecodeKernel::kFlashFp8;
    plan.fp8_head_dim = static_cast<Fp8MmaHeadDim>(p.head_dim);  // fp8_mma_head_dim: one of them
    plan.seqs_per_launch = std::min(p.num_seqs, kMaxGridYZ);
    const Split split =
        split_context(walked_context(p), options.partition_size, p.num_seqs * p.heads_kv, wanted);
    if (split.partitions > 1) {
      plan.partition_size = static_cast<int>(split.partition_size);
      plan.partitions = static_cast<int>(split.partitions);
      plan.workspace_floats = plan.seqs_per_launch * p.heads_q * split.partitions *
                              (p.head_dim + 2);
    }
    return plan;
  }
  // The instantiation, as flash_attention's plan makes it for a decode call (plan_flash).
  const std::optional<flash::DecodeKernel> flash_kernel =
      flash::decode_kernel(folded_call(p), /*paged=*/true);
  if (options.kernel != DecodeRequest::kV1 && options.kernel != DecodeRequest::kV2 &&
      flash_kernel && flash_runs(p, device)) {
    plan.kernel = DecodeKernel::kFlash;
    // The flash grid is (batch x kv heads) blocks in x.
    plan.seqs_per_launch = std::min(p.num_seqs, kMaxGridX / p.heads_kv);
    // Its split for a full launch; a shorter last one (past 2^31 / Hkv sequences) runs the same
    // split, whose scratch rows then bound its own.
    flash::FlashParams f = folded_call(p);
    f.batch = plan.seqs_per_launch;
    plan.flash = *flash_kernel;
    // The problem carries no addresses: ALiBi is its flag (flash_decode_params sets the slopes).
    plan.flash.alibi = p.alibi;
    plan.flash.features = plan.flash.features || p.alibi;
    plan.split = flash::plan_decode_split(f.batch, f.heads_q, f.seqlen_q,
                                          flash::decode_walked_keys(f, /*folded=*/true),
                                          f.head_dim, residency(plan.flash), device.sm_count);
    return plan;
  }

  // v1/v2 have a kernel per block size of the one list, or one for every block size
  // (block_size_at_run_time); any other block size (the bindings refuse one) runs on `rows`.
  const std::optional<PagedBlockSize> block_size = compiled_block_size(p.block_size);
  if (!block_size && !block_size_at_run_time(p.cache_type)) {
    plan.kernel = DecodeKernel::kRows;
    return plan;
  }
  if (block_size) plan.block_size = *block_size;
  // v1/v2 walk at most this many keys of a sequence (a window's span): it sizes the split.
  const int64_t max_context = walked_context(p);
  const int64_t base_partition = options.partition_size;
  const int64_t partitions = ceil_div(max_context, base_partition);
  const int64_t head_tiles = ceil_div(p.heads_q / p.heads_kv, kHeadTile);
  // Thread blocks per partition of every sequence. (Grid x, Hkv * head_tiles, is at most Hq,
  // far below CUDA's limit for any output that fits in memory.)
  const int64_t base_blocks = p.num_seqs * p.heads_kv * head_tiles;
  bool use_v1;
  if (options.kernel == DecodeRequest::kV1) {
    use_v1 = true;
  } else if (options.kernel == DecodeRequest::kV2) {
    use_v1 = false;
  } else {
    use_v1 = partitions <= 1 || partitions > kMaxPartitions ||
             (base_blocks >= wanted && max_context <= kV1MaxAutoContext);
  }
  plan.kernel = use_v1 ? DecodeKernel::kV1 : DecodeKernel::kV2;
  const int64_t kernel_head_dim = compiled_head_dim(p.head_dim);  // a value of the list
  plan.kernel_head_dim = static_cast<PagedHeadDim>(kernel_head_dim);
  plan.padded_head_dim = kernel_head_dim == p.head_dim ? 0 : static_cast<int>(kernel_head_dim);
  plan.config = has_stream_configs(p.dtype, p.cache_type, kernel_head_dim)
                    ? options.config
                    : StreamConfig::kDefault;
  plan.head_tiles = static_cast<int>(head_tiles);
  plan.run_time_block_size = block_size_at_run_time(p.cache_type);
  // Grid y is the sequences of one launch.
  plan.seqs_per_launch = std::min(p.num_seqs, kMaxGridYZ);
  if (use_v1) return plan;

  // A forced v2 on a context longer than kMaxPartitions partitions takes longer partitions.
  const Split split = split_context(max_context, base_partition, base_blocks, wanted);
  plan.partition_size = static_cast<int>(split.partition_size);
  plan.partitions = static_cast<int>(split.partitions);
  plan.workspace_floats = plan.seqs_per_launch * p.heads_q * split.partitions * (p.head_dim + 2);
  return plan;
}

DecodeProblem decode_problem(const PagedAttentionParams& p) {
  DecodeProblem d{};
  d.dtype = p.dtype;
  d.cache_type = p.kv.cache_type;
  d.num_seqs = p.num_seqs;
  d.heads_q = p.heads_q;
  d.heads_kv = p.kv.heads_kv;
  d.head_dim = p.kv.head_dim;
  d.block_size = p.kv.block_size;
  d.max_context_len = p.max_context_len;
  d.q_seq_stride = p.q_seq_stride;
  d.q_head_stride = p.q_head_stride;
  d.window_left = p.window_left;
  d.scale = p.scale;
  d.softcap = p.softcap;
  d.alibi = p.alibi_slopes != nullptr;
  d.caches_aligned16 = aligned16(p.kv.key_cache) && aligned16(p.kv.value_cache);
  d.io_aligned16 = aligned16(p.query) && aligned16(p.out);
  return d;
}

flash::FlashParams flash_decode_params(const PagedAttentionParams& p) {
  flash::FlashParams f = folded_call(decode_problem(p));
  f.q = p.query;
  f.k = p.kv.key_cache;
  f.v = p.kv.value_cache;
  f.out = p.out;
  f.kv_lens = p.kv.context_lens;
  // Sequence s is batch row s: its slopes row (or the one [Hq] row), a query head per fold row.
  f.alibi_slopes = p.alibi_slopes;
  f.alibi_batch_stride = p.alibi_seq_stride;
  return f;
}

std::string describe(const DecodePlan& plan) {
  std::string s;
  switch (plan.kernel) {
    case DecodeKernel::kFlash: s = "kernel=flash"; break;
    case DecodeKernel::kRows: s = "kernel=rows"; break;
    case DecodeKernel::kV1: s = "kernel=v1"; break;
    case DecodeKernel::kV2: s = "kernel=v2"; break;
    case DecodeKernel::kFlashFp8: s = "kernel=flash_fp8"; break;
  }
  if (plan.kernel == DecodeKernel::kV1 || plan.kernel == DecodeKernel::kV2) {
    s += std::string(" config=") + stream_config_name(plan.config) +
         " head_tiles=" + std::to_string(plan.head_tiles);
    if (plan.padded_head_dim > 0) s += " padded_head_dim=" + std::to_string(plan.padded_head_dim);
    if (plan.run_time_block_size) s += " block_size=run_time";
  }
  if (plan.kernel == DecodeKernel::kV2 ||
      (plan.kernel == DecodeKernel::kFlashFp8 && plan.partitions > 1)) {
    s += " partition_size=" + std::to_string(plan.partition_size) +
         " partitions=" + std::to_string(plan.partitions) +
         " workspace_floats=" + std::to_string(plan.workspace_floats);
  }
  return s + " seqs_per_launch=" + std::to_string(plan.seqs_per_launch);
}

std::optional<DecodeRequest> decode_request_named(std::string_view name) {
  if (name == "auto") return DecodeRequest::kAuto;
  if (name == "v1") return DecodeRequest::kV1;
  if (name == "v2") return DecodeRequest::kV2;
  if (name == "flash") return DecodeRequest::kFlash;
  return std::nullopt;
}

std::optional<StreamConfig> stream_config_named(std::string_view name) {
#define DJL_PAGED_STREAM_NAMED_(e, config_name) \
  if (name == config_name) return StreamConfig::e;
  DJL_PAGED_STREAM_CONFIGS(DJL_PAGED_STREAM_NAMED_)
#undef DJL_PAGED_STREAM_NAMED_
  return std::nullopt;
}

PrefillPlan plan_paged_prefill(const PagedPrefillParams& p) {
  PrefillPlan plan{};
  plan.grid_x = std::min(ceil_div(p.max_seqlen_q, kPrefillWarps), kMaxGridX);
  plan.grid_y = std::min(p.heads_q, kMaxGridYZ);
  plan.grid_z = std::min(p.num_seqs, kMaxGridYZ);
  return plan;
}

CachePlan plan_reshape_and_cache(const ReshapeAndCacheParams& p) {
  const int64_t size = element_size(p.dtype);
  CachePlan plan{};
  plan.blocks = std::min(p.num_tokens, kMaxGridX);
  if (is_fp8(p.kv.cache_type)) {
    // A thread quantises kFp8Group elements and stores them as one 8-byte word: rows of whole
    // words, 8-byte aligned caches; it reads them one element at a time (any strides).
    plan.vectorised = p.kv.head_dim % kFp8Group == 0 && aligned(p.kv.key_cache, kFp8Group) &&
                      aligned(p.kv.value_cache, kFp8Group);
    return plan;
  }
  plan.vectorised = (p.kv.head_dim * size) % 16 == 0 && aligned16(p.key) && aligned16(p.value) &&
                    aligned16(p.kv.key_cache) && aligned16(p.kv.value_cache) &&
                    (p.key_token_stride * size) % 16 == 0 && (p.key_head_stride * size) % 16 == 0 &&
                    (p.value_token_stride * size) % 16 == 0 &&
                    (p.value_head_stride * size) % 16 == 0;
  return plan;
}

std::string describe(const PrefillPlan& plan) {
  return "grid=" + std::to_string(plan.grid_x) + "," + std::to_string(plan.grid_y) + "," +
         std::to_string(plan.grid_z);
}

std::string describe(const CachePlan& plan) {
  return std::string("vectorised=") + (plan.vectorised ? "1" : "0") +
         " blocks=" + std::to_string(plan.blocks);
}

}  // namespace djl_attn::paged
