// Host side of the paged decode attention: chooses the tensor-core split-KV kernel
// (cuda/flash/flash_decode.h), v1 or v2, allocates v2's workspace and launches on PyTorch's
// current stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/flash/flash_decode.h"
#include "flash/flash_params.h"
#include "cuda/paged/paged_attention_kernel.cuh"
#include "cuda/paged/paged_cuda.h"

namespace djl_attn::paged {
namespace {

using kernels::kHeadTile;
using kernels::kPartitionSize;

// Thread blocks per SM wanted in the grid (3 are resident at a time, kMinBlocksPerSm): below
// this many, v2 splits the context further, so that every SM has blocks and the last wave is
// short.
constexpr int64_t kBlocksPerSm = 4;
// v1 stays the automatic choice, when the grid is full without splitting, up to this context:
// longer streams per block make the last wave's imbalance costlier than v2's reduce pass.
constexpr int64_t kV1MaxAutoContext = 2048;
// The reduce kernel keeps one weight per partition in shared memory: 32 KiB at most, under the
// 48 KiB a kernel gets without opting in.
constexpr int64_t kMaxPartitions = 8192;
// v2's shortest partition: 4 cache blocks of 16 tokens, one per warp (2 of 32 tokens).
constexpr int64_t kMinPartitionSize = 64;
// Grid y and z limits.
constexpr int64_t kMaxGridYZ = 65535;

enum class Variant { kAuto, kV1, kV2, kFlash };

// The switches of the paged decode launcher, read once at load (common/options.h) and switched
// in-process through djl_attn_set_option by tests and benchmarks.
//
// DJL_ATTN_PAGED_KERNEL forces a kernel: v1 (one pass per sequence), v2 (partitioned context plus
// a reduce), flash (the tensor-core split-KV decode kernel); auto lets the launcher choose.
Option kPagedKernel("DJL_ATTN_PAGED_KERNEL", {"auto", "v1", "v2", "flash"},
                    "forces a paged_attention CUDA kernel (tests, benchmarks)");

// DJL_ATTN_PAGED_CONFIG: how the decode kernel streams K/V (a tuning switch for benchmarks). The
// other configurations exist for float16/bfloat16 caches with head dims 64 and 128; other shapes
// run the default whatever is asked. Unset: smem4 (each warp streams cache blocks through a
// cp.async ring in shared memory), measured on an H200 at 2.63-2.93 TB/s against 2.48-2.78 for
// "default", the register streaming kernel, at batch 32/128 and context 4k/16k
// (docs/benchmarks.md).
// The tuning variants beyond smem4 and the register default are compiled in DJL_ATTN_TUNING
// builds only (paged_attention_launch.cuh).
std::vector<std::string> paged_config_choices() {
#if defined(DJL_ATTN_TUNING)
  return {"smem4", "default", "w8l2", "smem8", "pf", "w8l2pf"};
#else
  return {"smem4", "default"};
#endif
}

Option kPagedConfig("DJL_ATTN_PAGED_CONFIG", paged_config_choices(),
                    "how the paged decode kernel streams K/V (benchmarks)");

// DJL_ATTN_PAGED_PARTITION: v2's partition length in tokens before the launcher halves it for
// small grids (default kPartitionSize = 512); a tuning switch.
Option kPagedPartition("DJL_ATTN_PAGED_PARTITION",
                       {"512", "64", "128", "256", "1024", "2048", "4096", "8192"},
                       "v2's partition length in tokens (benchmarks)");

Variant requested_variant() {
  if (kPagedKernel.is("v1")) return Variant::kV1;
  if (kPagedKernel.is("v2")) return Variant::kV2;
  if (kPagedKernel.is("flash")) return Variant::kFlash;
  return Variant::kAuto;
}

kernels::KernelChoice requested_config() {
  using kernels::KernelChoice;
  if (kPagedConfig.is("default")) return KernelChoice::kDefault;
  if (kPagedConfig.is("w8l2")) return KernelChoice::kW8L2;
  if (kPagedConfig.is("smem8")) return KernelChoice::kSmem8;
  if (kPagedConfig.is("pf")) return KernelChoice::kPf;
  if (kPagedConfig.is("w8l2pf")) return KernelChoice::kW8L2Pf;
  return KernelChoice::kSmem4;
}

int64_t requested_partition_size() { return std::stoll(kPagedPartition.value()); }

void check_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    fail_invalid("paged_attention: ", what, ": expected data aligned to 16 bytes on CUDA, got "
                 "address ", reinterpret_cast<uintptr_t>(ptr));
  }
}

// Why the tensor-core split-KV kernel cannot run this call, or null when it can: float16/bfloat16
// caches, head dims 64/128/256, no ALiBi, at most 16 query heads per kv head (one m16 tile),
// 16-byte aligned query rows, and an sm_80+ device with the kernel's shared memory.
const char* flash_unsupported(const PagedAttentionParams& p, int device) {
  if (p.dtype != ElementType::kFloat16 && p.dtype != ElementType::kBFloat16) {
    return "float16/bfloat16 caches only";
  }
  if (!flash::decode::head_dim_compiled(p.head_dim)) return "head dims 64, 128 and 256 only";
  if (p.alibi_slopes != nullptr) return "no alibi_slopes";
  if (p.heads_q / p.heads_kv > flash::decode::kMaxRows) return "at most 16 query heads per kv head";
  if (reinterpret_cast<uintptr_t>(p.query) % 16 != 0 || p.q_seq_stride % 8 != 0 ||
      p.q_head_stride % 8 != 0 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0) {
    return "16-byte aligned query rows";
  }
  if (!flash::decode::runs_on(p.head_dim, device)) return "an sm_80+ GPU with its shared memory";
  return nullptr;
}

// The decode as the flash decode kernel sees it: the g = Hq / Hkv query heads of one kv head are
// g query rows of one block, and the keys of a sequence are read through its block table.
void run_flash_decode(const PagedAttentionParams& p, int device) {
  const int64_t group = p.heads_q / p.heads_kv;
  flash::FlashParams f{};
  f.q = p.query;
  f.k = p.key_cache;
  f.v = p.value_cache;
  f.out = p.out;
  f.lse = nullptr;  // paged_attention has no logsumexp output
  f.kv_lens = p.context_lens;
  f.q_batch_stride = p.q_seq_stride;
  f.q_seq_stride = p.q_head_stride;
  f.q_head_stride = p.q_head_stride * group;
  // Within a cache block, token t of kv head h is at (t * Hkv + h) * D.
  f.k_seq_stride = f.v_seq_stride = p.heads_kv * p.head_dim;
  f.k_head_stride = f.v_head_stride = p.head_dim;
  // out is [num_seqs, Hq, D], contiguous.
  f.out_batch_stride = p.heads_q * p.head_dim;
  f.out_seq_stride = p.head_dim;
  f.out_head_stride = group * p.head_dim;
  f.batch = p.num_seqs;
  f.seqlen_q = group;
  f.seqlen_k = p.max_context_len;
  f.heads_q = p.heads_kv;
  f.heads_kv = p.heads_kv;
  f.head_dim = p.head_dim;
  f.scale = p.scale;
  f.causal = false;
  f.dtype = p.dtype;
  const flash::decode::PagedRows rows{p.block_tables, p.max_blocks, static_cast<int>(p.block_size)};
  flash::decode::run(f, &rows, cuda::current_stream(device), device);
}

}  // namespace

void run_paged_attention_cuda(const PagedAttentionParams& p) {
  const int device = cuda::device_of(p.query);
  cuda::DeviceGuard guard(device);
  check_aligned(p.key_cache, "key_cache");
  check_aligned(p.value_cache, "value_cache");
  if (p.num_seqs > kMaxGridYZ) {
    fail_invalid("paged_attention: query: expected at most ", kMaxGridYZ,
                 " sequences per call on CUDA, got ", p.num_seqs);
  }

  const int64_t max_context = p.max_context_len;
  const int64_t base_partition = requested_partition_size();
  const int64_t partitions = (max_context + base_partition - 1) / base_partition;
  const int64_t head_tiles = (p.heads_q / p.heads_kv + kHeadTile - 1) / kHeadTile;
  // Thread blocks per partition of every sequence.
  const int64_t base_blocks = p.num_seqs * p.heads_kv * head_tiles;
  const int64_t wanted = kBlocksPerSm * cuda::multiprocessor_count(device);
  const Variant requested = requested_variant();
  // Read before any path is taken, so that a bad value fails whichever kernel runs.
  const kernels::KernelChoice config = requested_config();
  if (requested == Variant::kFlash || requested == Variant::kAuto) {
    const char* why_not = flash_unsupported(p, device);
    if (why_not == nullptr) {
      run_flash_decode(p, device);
      return;
    }
    if (requested == Variant::kFlash) {
      fail_invalid("paged_attention: DJL_ATTN_PAGED_KERNEL=flash: the tensor-core decode kernel "
                   "needs ", why_not, "; use v1, v2 or auto");
    }
  }
  bool use_v1;
  if (requested == Variant::kV1) {
    use_v1 = true;
  } else if (requested == Variant::kV2) {
    if (partitions > kMaxPartitions) {
      fail_invalid("paged_attention: DJL_ATTN_PAGED_KERNEL=v2: max_context_len ", max_context,
                   " needs more than ", kMaxPartitions, " partitions of ", base_partition,
                   " tokens; use v1 or auto");
    }
    use_v1 = false;
  } else {
    use_v1 = partitions <= 1 || partitions > kMaxPartitions ||
             (base_blocks >= wanted && max_context <= kV1MaxAutoContext);
  }

  kernels::LaunchPlan plan{};
  plan.config = config;
  plan.head_tiles = static_cast<int>(head_tiles);
  Tensor workspace;
  if (use_v1) {
    plan.partition_size = 0;
    plan.partitions = 1;
    plan.ws = {nullptr, nullptr, nullptr, 1};
  } else {
    // Few sequences and heads: shorter partitions, so that the grid still fills the GPU
    // (batch 1, 8 kv heads, 1k context: 16 thread blocks at 512 tokens, 128 at 64).
    int64_t partition_size = base_partition;
    int64_t split = std::max<int64_t>(partitions, 1);
    while (partition_size > kMinPartitionSize && base_blocks * split < wanted &&
           2 * split <= kMaxPartitions) {
      partition_size /= 2;
      split = std::max<int64_t>((max_context + partition_size - 1) / partition_size, 1);
    }
    const int64_t rows = p.num_seqs * p.heads_q * split;
    workspace = Tensor::empty({rows * (p.head_dim + 2)}, DType::kFloat32,
                              Device{DeviceType::kCuda, device});
    float* base = workspace.data_as<float>();
    plan.partition_size = static_cast<int>(partition_size);
    plan.partitions = static_cast<int>(split);
    plan.ws = {base, base + rows, base + 2 * rows, static_cast<int>(split)};
  }

  void* stream = cuda::current_stream(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return kernels::launch_paged_attention<float>(p, plan, stream);
    case ElementType::kFloat16: return kernels::launch_paged_attention<__half>(p, plan, stream);
    case ElementType::kBFloat16:
      return kernels::launch_paged_attention<__nv_bfloat16>(p, plan, stream);
  }
}

}  // namespace djl_attn::paged
