// The paged KV cache operators on CUDA. Each entry point makes the tensors' device current and
// launches on PyTorch's current stream of that device.
#pragma once

#include <cstddef>

#include "paged/paged_params.h"

namespace djl_attn::paged {

// One thread block per token; 16-byte vector copies where key/value rows and strides allow
// them, element copies otherwise.
void run_reshape_and_cache_cuda(const ReshapeAndCacheParams& params);

// Decode attention: the flash family's tensor-core split-KV decode kernel where it applies (on an
// fp8 cache, the fp8 tensor-core kernel of paged_fp8_mma.cuh), else one thread block per
// (sequence, kv head, tile of up to 4 of its query heads), reading each K/V byte once for the
// tile, over the whole context (v1) or over partitions of 64 to 512 tokens (v2) plus a reduce
// kernel; caches that are not 16-byte aligned, and rows that are not whole 16-byte vectors, take
// the prefill kernel. The plan
// (paged_plan.h) picks by dtype, shape, context length and SM count; DJL_ATTN_PAGED_KERNEL=
// v1|v2|flash forces one (auto or unset: the plan's choice). Tuning switches for benchmarks:
// DJL_ATTN_PAGED_CONFIG picks the kernel configuration (how K/V are streamed; float16/bfloat16,
// D = 64/128 only), DJL_ATTN_PAGED_PARTITION v2's partition.
void run_paged_attention_cuda(const PagedAttentionParams& params);

// The backend's validation copies: every range to the host through one pinned buffer, one
// stream synchronisation for all of them.
void copy_indices_to_host_cuda(const HostCopy* copies, size_t count);

// Chunked-prefill attention: one warp per (query row, head), keys streamed through the block
// table with an online softmax. Simple and correct, not tuned.
void run_paged_prefill_cuda(const PagedPrefillParams& params);

}  // namespace djl_attn::paged
