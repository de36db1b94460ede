// Parameters of the paged KV cache operators (reshape_and_cache, paged_attention,
// paged_prefill_attention), shared by the CPU and CUDA kernels. Knows nothing of PyTorch: the
// operator bindings fill them from tensors.
//
// The cache layout (docs/operators.md, "Paged KV cache"): one key cache and one value cache per layer, each
// [num_blocks, block_size, Hkv, D], contiguous. Token `offset` of physical block `b` lives at
// slot b * block_size + offset. A sequence's logical block i is physical block
// block_tables[seq][i].
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/element_type.h"

#if defined(__CUDACC__)
#define DJL_PAGED_HOST_DEVICE __host__ __device__
#else
#define DJL_PAGED_HOST_DEVICE
#endif

namespace djl_attn::paged {

// The sliding window's rule, for every paged kernel (CPU and CUDA): the first key a query at
// `position` sees when it sees window_left keys before its own (-1: every key), i.e.
// position - window_left, or 0.
DJL_PAGED_HOST_DEVICE inline int64_t first_visible_key(int64_t position, int64_t window_left) {
  return window_left >= 0 && position > window_left ? position - window_left : 0;
}

// The keys [first, end) a query at `position` sees among its sequence's `context` keys, as
// FlashAttention has them (bottom-right aligned: a chunk's rows are the context's last
// positions, and a position may be negative when the chunk is longer than the context):
// causal, keys j <= position; otherwise every key, or with window_right >= 0 the keys
// j <= position + window_right; with window_left >= 0 only j >= position - window_left.
// end <= first: none (its output is 0).
struct KeySpan {
  int64_t first, end;
};
DJL_PAGED_HOST_DEVICE inline KeySpan visible_span(int64_t position, int64_t context,
                                                  int64_t window_left, int64_t window_right,
                                                  bool causal) {
  KeySpan span{first_visible_key(position, window_left), context};
  const int64_t last = causal ? position : (window_right >= 0 ? position + window_right : context);
  if (last + 1 < span.end) span.end = last + 1;
  if (span.end < span.first) span.end = span.first;
  return span;
}

// The ALiBi term of key j for a query at `position`: FlashAttention's -slope * |position - j|,
// which on the causal keys (j <= position) is vLLM's slope * (j - position).
DJL_PAGED_HOST_DEVICE inline float alibi_bias(float slope, int64_t key, int64_t position) {
  const int64_t d = key - position;
  return slope * static_cast<float>(d <= 0 ? d : -d);
}

using ::djl_attn::ElementType;

// Sizes of the attention operators: the one list. The bindings accept every head dim in
// [1, kMaxHeadDim] and the block sizes here; the CUDA launcher instantiates its vector kernels
// (v1/v2) for each (dtype, compiled head dim, block size) and runs a head dim between the
// compiled ones on the next one up (cuda/paged/paged_plan.h). The C interface exports them
// (djl_attn_supported_values: "paged.max_head_dim", "paged.head_dims" (the compiled ones),
// "paged.block_sizes"), which the Java builders, the tests and docs/operators.md read. Every
// compiled head dim times the element size is a multiple of 16 bytes, so a key row is a whole
// number of 16-byte vectors.
#define DJL_PAGED_FOR_EACH_HEAD_DIM(X) X(64) X(80) X(96) X(128) X(256)
#define DJL_PAGED_FOR_EACH_BLOCK_SIZE(X) X(8) X(16) X(32)

#define DJL_PAGED_LIST_ITEM(v) v,
constexpr int kHeadDims[] = {DJL_PAGED_FOR_EACH_HEAD_DIM(DJL_PAGED_LIST_ITEM)};
constexpr int kBlockSizes[] = {DJL_PAGED_FOR_EACH_BLOCK_SIZE(DJL_PAGED_LIST_ITEM)};
#undef DJL_PAGED_LIST_ITEM

// The largest head dim: the largest compiled one (the rows kernel's lanes hold 256 / 32 dims).
constexpr int kMaxHeadDim = 256;
static_assert(kHeadDims[sizeof(kHeadDims) / sizeof(kHeadDims[0]) - 1] == kMaxHeadDim,
              "every head dim has a compiled one at or above it");

inline bool is_supported_head_dim(int64_t d) { return d >= 1 && d <= kMaxHeadDim; }

// The smallest compiled head dim >= d (d supported).
inline int64_t compiled_head_dim(int64_t d) {
  for (int v : kHeadDims) {
    if (v >= d) return v;
  }
  return kMaxHeadDim;
}

inline bool is_supported_block_size(int64_t b) {
  for (int v : kBlockSizes) {
    if (v == b) return true;
  }
  return false;
}

// What the key and value caches store.
//   kQuery    elements of the dtype of the query (of key/value for reshape_and_cache)
//   kFp8E4M3  OCP e4m3fn bytes (common/fp8.h), from a uint8 or float8_e4m3fn tensor: a cached
//             value is byte * scale, the scale of its kv head; reshape_and_cache writes
//             sat(round_to_nearest_even(x / scale)).
//   kFp8E5M2  OCP e5m2 bytes (common/fp8.h), from a float8_e5m2 tensor or a uint8 one with
//             fp8_e5m2=True (vLLM's kv_cache_dtype fp8_e5m2); scaled and written as kFp8E4M3.
enum class CacheType { kQuery, kFp8E4M3, kFp8E5M2 };

DJL_PAGED_HOST_DEVICE constexpr bool is_fp8(CacheType type) { return type != CacheType::kQuery; }

// The dequantisation scales of an fp8 cache, float32: head h's scale is
// values[h * head_stride], or 1 when values is null.
struct CacheScale {
  const float* values;  // [1] (per tensor, head_stride 0) or [Hkv] (per head, head_stride 1)
  int64_t head_stride;
};

// One device-to-host copy of an index tensor's bytes, for the bindings' validation.
struct HostCopy {
  void* dst;
  const void* src;
  size_t bytes;
};

// The paged KV cache of one layer as every paged kernel reads it: one value, FlashInfer's
// paged_kv_t, that reshape_and_cache, paged_attention, paged_prefill_attention and decoder_layer
// carry as it is (docs/operators.md, "Paged KV cache"; the Java PagedKvCache and PagedBatch
// describe the same arrays). The bindings fill it once from the tensors (paged_checks.h,
// paged_kv); plans read its shape facts, kernels its pointers.
struct PagedKv {
  void* key_cache;              // [num_blocks, block_size, Hkv, D], contiguous, of cache_type
  void* value_cache;            // [num_blocks, block_size, Hkv, D], contiguous, of cache_type
  // The batch's view of the cache; null for reshape_and_cache, which addresses slots.
  const int32_t* block_tables;  // [num_seqs, table_stride], contiguous: sequence s's logical
                                // block i is physical block block_tables[s * table_stride + i]
  const int32_t* context_lens;  // [num_seqs], contiguous: cached tokens of each sequence
  int64_t table_stride;         // columns of block_tables (max_blocks); 0 without them
  int64_t num_blocks;           // physical blocks in each cache
  int64_t block_size;           // tokens per cache block
  int64_t heads_kv;             // Hkv
  int64_t head_dim;             // D
  CacheType cache_type;
  CacheScale k_scale, v_scale;  // fp8 caches only; values null otherwise
};

// reshape_and_cache: key_cache[slot / bs, slot % bs, h, :] = key[t, h, :] for every token t
// whose slot_mapping[t] >= 0 (same for values).
struct ReshapeAndCacheParams {
  const void* key;              // [T, Hkv, D], last dim contiguous
  const void* value;            // [T, Hkv, D], last dim contiguous
  PagedKv kv;                   // the caches written (no block tables)
  const int64_t* slot_mapping;  // [T], contiguous; negative = skip, else < num_blocks * bs

  // Strides in elements.
  int64_t key_token_stride, key_head_stride;
  int64_t value_token_stride, value_head_stride;

  int64_t num_tokens;  // T
  ElementType dtype;   // of key and value (and of both caches when kv.cache_type is kQuery)
};

// The sliding window and logit soft-cap of both attention operators, as flash_attention has
// them. A query at position p sees key j iff j <= p and, when window_left >= 0,
// j >= p - window_left (window_left 0: only itself); paged_prefill_attention's non-causal calls
// see the keys after p too (visible_span). Its score of key j is s = scale * q . k_j,
// soft-capped to softcap * tanh(s / softcap) when softcap > 0, then given the ALiBi term
// -slope * |j - p| (alibi_bias) when slopes are given (on an fp8 cache: with k_j dequantised),
// slope = alibi_slopes[s * alibi_seq_stride + h] for sequence s and query head h.
//
// paged_attention (decode): one query token per sequence at p = context_len - 1, attending to
// the first kv.context_lens[s] tokens of its cache.
struct PagedAttentionParams {
  const void* query;          // [num_seqs, Hq, D], last dim contiguous
  PagedKv kv;                 // the caches and the batch's block tables and context lengths
  const float* alibi_slopes;  // [Hq] or [num_seqs, Hq] float32, contiguous, or null
  int64_t alibi_seq_stride = 0;  // 0 for [Hq] (one row for every sequence), Hq for [num_seqs, Hq]
  void* out;                  // [num_seqs, Hq, D], contiguous, dtype of query

  // Strides of query in elements.
  int64_t q_seq_stride, q_head_stride;

  int64_t num_seqs;
  int64_t heads_q;          // Hq; Hq % Hkv == 0, query head h reads kv head h / (Hq / Hkv)
  int64_t max_context_len;  // >= every context_lens[s]; sizes the CUDA grid and workspace
  float scale;              // multiplies q . k
  int64_t window_left = -1; // -1: unbounded; >= 0: keys j >= p - window_left only
  float softcap = 0.f;      // 0: none; > 0: scores softcap * tanh(s / softcap)
  ElementType dtype;        // of query and output (and of the caches when kv.cache_type is kQuery)
};

// paged_prefill_attention: the query tokens of sequence s are the packed rows
// [cu_seqlens_q[s], cu_seqlens_q[s + 1]) of query: the last n = cu_seqlens_q[s+1] -
// cu_seqlens_q[s] positions of its kv.context_lens[s] cached tokens (written before with
// reshape_and_cache), FlashAttention's bottom-right alignment. Query row t of the chunk sits at
// position p = context_len - n + t (negative for the first rows of a chunk longer than its
// context: FlashAttention's Sq > Sk) and sees the keys visible_span gives it (causal: j <= p;
// and j >= p - window_left), scored as paged_attention scores them.
//
// The chunk's own keys and values (positions context_len - n .. context_len - 1) are read from
// new_key / new_value when given, n >= kMinOwnRowsChunk and n <= context_len (the chunk is the
// last n cached tokens; a chunk longer than its context has no such tokens), the prefix before
// them from the cache: vLLM's prefix prefill, which on an fp8 cache attends the dequantised
// prefix and the new tokens as computed (not their quantised copies). Otherwise every key comes
// from the cache.
//
// The shortest chunk that attends its own tokens from new_key / new_value: a chunk of one token
// is a decode row and reads its token back from the cache, as paged_attention's decode kernels
// do (vLLM's paged decode), so that a sequence's result depends neither on the batch it runs in
// nor on the kernel that batch takes.
constexpr int64_t kMinOwnRowsChunk = 2;

struct PagedPrefillParams {
  const void* query;          // [T, Hq, D], last dim contiguous
  PagedKv kv;                 // the caches and the batch's block tables and context lengths
  const int32_t* cu_seqlens_q;  // [num_seqs + 1], contiguous; null (CUDA's paged_attention on
                                // unaligned caches only): one query row per sequence, row s
  const float* alibi_slopes;  // [Hq] or [num_seqs, Hq] float32, contiguous, or null
  int64_t alibi_seq_stride = 0;  // 0 for [Hq] (one row for every sequence), Hq for [num_seqs, Hq]
  void* out;                  // [T, Hq, D], contiguous, dtype of query
  const void* new_key;        // [T, Hkv, D], last dim contiguous, dtype of query, or null: the
                              // chunks' own keys, row cu_seqlens_q[s] + t for chunk row t
  const void* new_value;      // [T, Hkv, D], likewise; null exactly when new_key is

  // Strides of query, new_key and new_value in elements.
  int64_t q_token_stride, q_head_stride;
  int64_t new_key_token_stride = 0, new_key_head_stride = 0;
  int64_t new_value_token_stride = 0, new_value_head_stride = 0;

  int64_t num_seqs;
  int64_t num_tokens;    // T
  int64_t heads_q;
  int64_t max_seqlen_q;  // >= every chunk length n; sizes the CUDA grid
  float scale;
  int64_t window_left = -1;  // -1: unbounded; >= 0: keys j >= p - window_left only
  int64_t window_right = -1; // not causal: -1 unbounded; >= 0 keys j <= p + window_right only
  bool causal = true;        // keys j <= p only (false: FlashAttention's non-causal rows)
  float softcap = 0.f;       // 0: none; > 0: scores softcap * tanh(s / softcap)
  ElementType dtype;        // of query and output (and of the caches when kv.cache_type is kQuery)
};

// The ALiBi slope of sequence s and query head h (0 without ALiBi).
template <typename Params>
DJL_PAGED_HOST_DEVICE inline float alibi_slope(const Params& p, int64_t seq, int64_t head) {
  return p.alibi_slopes != nullptr ? p.alibi_slopes[seq * p.alibi_seq_stride + head] : 0.f;
}

}  // namespace djl_attn::paged
