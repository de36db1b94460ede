// Host side of the paged decode attention: runs the plan (paged_plan.h) of a call, made once per
// distinct problem and kept (cached_plan), on PyTorch's current stream: the flash family's
// split-KV decode kernel (cuda/flash/flash_decode.h), the fp8 tensor-core kernel
// (paged_fp8_mma.cuh), v1 or v2 (paged_attention_launch.cuh) with v2's workspace, or the
// warp-per-row kernel of paged_prefill.cu for caches that are not 16-byte aligned or rows that
// are not whole 16-byte vectors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/common/switches.h"
#include "cuda/flash/flash_decode.h"
#include "cuda/paged/paged_attention_kernel.cuh"
#include "cuda/paged/paged_cuda.h"
#include "cuda/paged/paged_plan.h"

namespace djl_attn::paged {
namespace {

// The plan of a problem: made once per distinct problem and kept, per thread, for the last few.
// The layers of a decode step give equal problems (the same batch, the same block tables and
// model shapes: DecodeProblem is the call without its addresses), so a step is planned once and
// its plan reused by every layer, without reading anything back from the device. The switches
// and the device are part of the key: a switch changed in-process plans afresh.
DecodePlan cached_plan(const DecodeProblem& problem, const DecodeOptions& options,
                              int device) {
  struct Entry {
    DecodeProblem problem;
    DecodeOptions options;
    int device = -1;  // -1: empty
    DecodePlan plan;
  };
  // A few entries: a model whose layers differ in shape (Gemma-2 alternates sliding-window and
  // global layers) still plans once per step.
  static thread_local std::array<Entry, 4> entries;
  static thread_local size_t next = 0;
  for (const Entry& e : entries) {
    if (e.device == device && e.problem == problem && e.options == options) return e.plan;
  }
  Entry& e = entries[next];
  next = (next + 1) % entries.size();
  const DecodeResidency residency = [device](const flash::DecodeKernel& kernel) {
    return flash::decode::blocks_per_sm(kernel, device);
  };
  e.plan = plan_paged_attention(problem, options, cuda::device_facts(device), residency);
  e.problem = problem;
  e.options = options;
  e.device = device;
  return e.plan;
}

// Sequences [first, first + count) of `p`: the query rows, table rows, lengths and output rows
// of those sequences.
PagedAttentionParams sequences(const PagedAttentionParams& p, int64_t first, int64_t count) {
  const int64_t size = element_size(p.dtype);
  PagedAttentionParams slice = p;
  slice.query = static_cast<const char*>(p.query) + first * p.q_seq_stride * size;
  slice.kv.block_tables = p.kv.block_tables + first * p.kv.table_stride;
  slice.kv.context_lens = p.kv.context_lens + first;
  if (p.alibi_slopes != nullptr) slice.alibi_slopes = p.alibi_slopes + first * p.alibi_seq_stride;
  slice.out = static_cast<char*>(p.out) + first * p.heads_q * p.kv.head_dim * size;
  slice.num_seqs = count;
  return slice;
}

// The decode as paged_prefill_attention's kernel sees it: one query row per sequence (no
// cu_seqlens_q), the last position of its context.
void run_rows(const PagedAttentionParams& p) {
  PagedPrefillParams r{};
  r.query = p.query;
  r.kv = p.kv;
  r.cu_seqlens_q = nullptr;
  r.alibi_slopes = p.alibi_slopes;
  r.alibi_seq_stride = p.alibi_seq_stride;
  r.out = p.out;
  r.q_token_stride = p.q_seq_stride;
  r.q_head_stride = p.q_head_stride;
  r.num_seqs = p.num_seqs;
  r.num_tokens = p.num_seqs;
  r.heads_q = p.heads_q;
  r.max_seqlen_q = 1;
  r.scale = p.scale;
  r.window_left = p.window_left;
  r.softcap = p.softcap;
  r.dtype = p.dtype;
  run_paged_prefill_cuda(r);
}

template <typename T>
void launch_v1_v2_typed(const PagedAttentionParams& p, const DecodePlan& plan,
                        const kernels::PartitionWorkspace& ws, void* stream) {
  if (p.kv.cache_type == CacheType::kFp8E4M3) {
    return kernels::launch_paged_attention<T, kernels::Fp8E4M3>(p, plan, ws, stream);
  }
  if (p.kv.cache_type == CacheType::kFp8E5M2) {
    return kernels::launch_paged_attention<T, kernels::Fp8E5M2>(p, plan, ws, stream);
  }
  return kernels::launch_paged_attention<T, T>(p, plan, ws, stream);
}

void launch_flash_fp8(const PagedAttentionParams& p, const DecodePlan& plan,
                      const kernels::PartitionWorkspace& ws, void* stream) {
  // The plan picks this kernel for float16/bfloat16 queries only (flash_fp8_runs).
  assert(p.dtype != ElementType::kFloat32);
  if (p.kv.cache_type == CacheType::kFp8E5M2) {
    if (p.dtype == ElementType::kFloat16) {
      return kernels::launch_fp8_mma<__half, kernels::Fp8E5M2>(p, plan, ws, stream);
    }
    return kernels::launch_fp8_mma<__nv_bfloat16, kernels::Fp8E5M2>(p, plan, ws, stream);
  }
  if (p.dtype == ElementType::kFloat16) {
    return kernels::launch_fp8_mma<__half, kernels::Fp8E4M3>(p, plan, ws, stream);
  }
  return kernels::launch_fp8_mma<__nv_bfloat16, kernels::Fp8E4M3>(p, plan, ws, stream);
}

void launch_v1_v2(const PagedAttentionParams& p, const DecodePlan& plan,
                  const kernels::PartitionWorkspace& ws, void* stream) {
  switch (p.dtype) {
    case ElementType::kFloat32: return launch_v1_v2_typed<float>(p, plan, ws, stream);
    case ElementType::kFloat16: return launch_v1_v2_typed<__half>(p, plan, ws, stream);
    case ElementType::kBFloat16: return launch_v1_v2_typed<__nv_bfloat16>(p, plan, ws, stream);
  }
}

}  // namespace

void run_paged_attention_cuda(const PagedAttentionParams& p) {
  const int device = cuda::device_of(p.query);
  cuda::DeviceGuard guard(device);
  const DecodePlan plan = cached_plan(decode_problem(p), cuda::cuda_switches().paged, device);
  if (plan.kernel == DecodeKernel::kRows) return run_rows(p);

  // v2's workspace, for one launch: the launches of one call run in stream order and reuse it.
  cuda::Scratch workspace;
  kernels::PartitionWorkspace ws{nullptr, nullptr, nullptr, plan.partitions};
  if (plan.workspace_floats > 0) {
    workspace = cuda::Scratch(static_cast<size_t>(plan.workspace_floats) * sizeof(float), device);
    const int64_t rows = plan.seqs_per_launch * p.heads_q * plan.partitions;
    float* base = workspace.data_as<float>();
    ws = {base, base + rows, base + 2 * rows, plan.partitions};
  }
  void* stream = cuda::current_stream(device);
  for (int64_t first = 0; first < p.num_seqs; first += plan.seqs_per_launch) {
    const PagedAttentionParams slice =
        sequences(p, first, std::min(plan.seqs_per_launch, p.num_seqs - first));
    if (plan.kernel == DecodeKernel::kFlash) {
      flash::decode::run(flash_decode_params(slice), /*folded=*/true, &slice.kv, plan.flash,
                         plan.split, static_cast<cudaStream_t>(stream), device);
    } else if (plan.kernel == DecodeKernel::kFlashFp8) {
      launch_flash_fp8(slice, plan, ws, stream);
    } else {
      launch_v1_v2(slice, plan, ws, stream);
    }
  }
}

}  // namespace djl_attn::paged
