// Host side of the paged decode attention: chooses v1 or v2, allocates v2's workspace and
// launches on PyTorch's current stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/paged/paged_attention_kernel.cuh"
#include "cuda/paged/paged_cuda.h"

namespace djl_attn::paged {
namespace {

using kernels::kPartitionSize;

// Static shared memory of the attention kernel is at most ~5.2 KiB (query, partial outputs,
// reduction slots); v1 adds one float per context token on top.
constexpr size_t kStaticSharedReserve = 8 * 1024;
// v1 stays the automatic choice up to this context: beyond it its per-block shared memory
// (4 bytes a token) starts to limit how many blocks an SM holds (vLLM draws the line there too).
constexpr int64_t kV1MaxAutoContext = 8192;
// v1 needs this many thread blocks per SM to keep the memory system busy without splitting.
constexpr int64_t kV1BlocksPerSm = 4;
constexpr int64_t kMaxPartitions = 8192;
// v2's shortest partition: 8 blocks of 16 tokens, two per warp.
constexpr int64_t kMinPartitionSize = 128;
// Grid y and z limits.
constexpr int64_t kMaxGridYZ = 65535;

enum class Variant { kAuto, kV1, kV2 };

Variant requested_variant() {
  const char* env = std::getenv("DJL_ATTN_PAGED_KERNEL");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "auto") == 0) return Variant::kAuto;
  if (std::strcmp(env, "v1") == 0) return Variant::kV1;
  if (std::strcmp(env, "v2") == 0) return Variant::kV2;
  fail_invalid("paged_attention: environment variable DJL_ATTN_PAGED_KERNEL: expected v1, v2 or "
               "auto, got '", env, "'");
}

int max_shared_optin(int device) {
  int bytes = 0;
  DJL_ATTN_CUDA_CHECK(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

void check_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    fail_invalid("paged_attention: ", what, ": expected data aligned to 16 bytes on CUDA, got "
                 "address ", reinterpret_cast<uintptr_t>(ptr));
  }
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
  const int64_t partitions = (max_context + kPartitionSize - 1) / kPartitionSize;
  const size_t v1_shared = static_cast<size_t>(max_context) * sizeof(float);
  const bool v1_fits = v1_shared + kStaticSharedReserve <= static_cast<size_t>(max_shared_optin(device));
  const Variant requested = requested_variant();
  bool use_v1;
  if (requested == Variant::kV1) {
    if (!v1_fits) {
      fail_invalid("paged_attention: DJL_ATTN_PAGED_KERNEL=v1: max_context_len ", max_context,
                   " needs more shared memory than one thread block has; use v2 or auto");
    }
    use_v1 = true;
  } else if (requested == Variant::kV2) {
    use_v1 = false;
  } else {
    const int64_t blocks = p.num_seqs * p.heads_q;
    use_v1 = v1_fits && (partitions <= 1 ||
                         (max_context <= kV1MaxAutoContext &&
                          blocks >= kV1BlocksPerSm * cuda::multiprocessor_count(device)));
  }

  kernels::LaunchPlan plan{};
  Tensor workspace;
  if (use_v1) {
    plan.partition_size = 0;
    plan.partitions = 1;
    plan.shared_bytes = v1_shared;
    plan.ws = {nullptr, nullptr, nullptr, 1};
  } else {
    // The reduce kernel keeps one weight per partition in shared memory (32 KiB at most here,
    // under the 48 KiB a kernel gets without opting in).
    const int64_t max_partitions = std::max<int64_t>(partitions, 1);
    if (max_partitions > kMaxPartitions) {
      fail_invalid("paged_attention: max_context_len: expected at most ",
                   kMaxPartitions * kPartitionSize, " on CUDA, got ", max_context);
    }
    // Few sequences and heads: shorter partitions, so that the grid still fills the GPU
    // (batch 1, 32 heads, 1k context: 64 thread blocks at 512 tokens, 256 at 128).
    int64_t partition_size = kPartitionSize;
    int64_t split = max_partitions;
    const int64_t wanted = kV1BlocksPerSm * cuda::multiprocessor_count(device);
    while (partition_size > kMinPartitionSize && p.num_seqs * p.heads_q * split < wanted &&
           2 * split <= kMaxPartitions) {
      partition_size /= 2;
      split = (max_context + partition_size - 1) / partition_size;
      split = std::max<int64_t>(split, 1);
    }
    const int64_t rows = p.num_seqs * p.heads_q * split;
    workspace = Tensor::empty({rows * (p.head_dim + 2)}, DType::kFloat32,
                              Device{DeviceType::kCuda, device});
    float* base = workspace.data_as<float>();
    plan.partition_size = static_cast<int>(partition_size);
    plan.partitions = static_cast<int>(split);
    plan.shared_bytes = partition_size * sizeof(float);
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
