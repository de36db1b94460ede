// The checks every operator that reads a paged KV cache runs at its boundary (reshape_and_cache,
// paged_attention, paged_prefill_attention, decoder_layer): the caches and their FP8 scales,
// the batch's index tensors, and - unless the caller vouches for them - their values, read back
// to the host in one batched copy. Messages name the operator and the argument.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "common/check.h"
#include "common/tensor.h"
#include "paged/paged_params.h"

namespace djl_attn::paged {

// A buffer for a small index tensor's values on the host, and the copy that fills it.
template <typename I>
std::vector<I> host_buffer(const Tensor& t) {
  return std::vector<I>(static_cast<size_t>(t.numel()));
}

template <typename I>
HostCopy copy_into(std::vector<I>& dst, const Tensor& src) {
  return {dst.data(), src.data(), dst.size() * sizeof(I)};
}

// Copies every range of device memory to the host, waiting once; null for host memory.
using CopyIndicesToHost = void (*)(const HostCopy* copies, size_t count);

// Fills the host buffers: from the device in one batch (a single wait for the stream) when the
// backend has device memory, with memcpy otherwise.
void copy_to_host(CopyIndicesToHost copy, std::initializer_list<HostCopy> copies);

// The dtypes that hold an fp8 cache: DJL has no fp8 dtype and passes uint8, as vLLM stores its
// fp8 caches; torch.float8_e4m3fn and torch.float8_e5m2 name the bytes' format too.
bool is_fp8_dtype(DType dtype);

// The rules both caches follow: [num_blocks, block_size, Hkv, D], contiguous, on the device of
// `ref` (the query or the new keys), of its dtype or both fp8 of one dtype, supported sizes when
// `attention`. Returns what they store: a uint8 cache e4m3fn bytes, or e5m2 ones when
// `fp8_e5m2` (the operators' fp8_e5m2 argument, refused with any dtype but uint8 and
// float8_e5m2); a float8 cache its dtype's format.
CacheType check_caches(const char* op, const Tensor& key_cache, const Tensor& value_cache,
                       const Tensor& ref, ArgName ref_name, bool attention, bool fp8_e5m2);

// The paged KV value (paged_params.h) of checked caches and, for the attention operators, the
// batch's block tables and context lengths (null for reshape_and_cache): the one place a binding
// fills it.
PagedKv paged_kv(const Tensor& key_cache, const Tensor& value_cache, const Tensor* block_tables,
                 const Tensor* context_lens, CacheType cache_type, CacheScale k_scale,
                 CacheScale v_scale);

// k_scale / v_scale: only with an fp8 cache; float32 [1] (per tensor) or [Hkv] (per head),
// contiguous, on the cache's device. Absent: 1.
CacheScale check_scale(const char* op, const char* arg, const std::optional<Tensor>& scale,
                       const Tensor& key_cache, CacheType cache_type);

// The host buffer of an optional scale's values (empty when absent), and its batched copy.
std::vector<float> scale_buffer(const std::optional<Tensor>& scale);
HostCopy copy_scale(std::vector<float>& dst, const std::optional<Tensor>& scale);

// k_scale / v_scale values: finite and > 0.
void check_scale_values(const char* op, const char* arg, const std::vector<float>& values);

// An int32/int64 index tensor: rank, dtype, contiguous, on the device of `ref` (named ref_arg).
void check_index_tensor(const char* op, const Tensor& t, const char* arg, int64_t dims,
                        const char* layout, DType dtype, const Tensor& ref,
                        const char* ref_arg = "query");

// The rules of a batch's index values, stated once: the operators run them on the values read
// back from their tensors (unless the caller vouches for them), and djl_attn_check_paged_indices
// (c_api.h) runs them on a bridge's host arrays (the Java PagedBatch, once per step). Messages
// start with `op` and name the argument and the sequence or token.
//
// Context lengths within [0, max_blocks * block_size] and the blocks each sequence uses within
// [0, num_blocks): context_lens [num_seqs], tables [num_seqs, max_blocks] row-major.
void check_block_tables(const char* op, const int32_t* context_lens, int64_t num_seqs,
                        const int32_t* tables, int64_t max_blocks, int64_t block_size,
                        int64_t num_blocks);
inline void check_block_tables(const char* op, const std::vector<int32_t>& context_lens,
                               const std::vector<int32_t>& tables, int64_t max_blocks,
                               int64_t block_size, int64_t num_blocks) {
  check_block_tables(op, context_lens.data(), static_cast<int64_t>(context_lens.size()),
                     tables.data(), max_blocks, block_size, num_blocks);
}

// Slots below num_blocks * block_size = `num_slots` (negative ones are skipped): slot_mapping
// [num_tokens].
void check_slots(const char* op, const int64_t* slot_mapping, int64_t num_tokens,
                 int64_t num_slots);

// cu_seqlens_q: 0 first, T last, non-decreasing; every chunk <= max_seqlen_q and, when
// `chunks_cached` (decoder_layer, which caches the chunk's own keys first), held by its context
// (the new tokens are counted in context_lens).
void check_chunks(const char* op, const std::vector<int32_t>& cu,
                  const std::vector<int32_t>& lens, int64_t tokens, int64_t max_seqlen_q,
                  bool chunks_cached = true);

}  // namespace djl_attn::paged
