// The paged operators' parameters for decoder_layer's cache write and attention, filled from the
// layer's PagedCacheView in this one place for the CPU and CUDA backends alike. The step's q, k
// and v are rows of the qkv workspace [T, (Hq + 2 Hkv) D]: q heads, then k, then v.
#pragma once

#include "decoder/decoder_layer_params.h"
#include "paged/paged_params.h"

namespace djl_attn::decoder {

// reshape_and_cache of the step's k and v rows into their slots.
inline paged::ReshapeAndCacheParams cache_write_params(const DecoderLayerParams& p,
                                                       const void* qkv) {
  const char* base = static_cast<const char*>(qkv);
  const int64_t e = element_size(p.dtype);
  paged::ReshapeAndCacheParams w{};
  w.key = base + p.heads_q * p.head_dim * e;
  w.value = base + (p.heads_q + p.heads_kv) * p.head_dim * e;
  w.kv = p.cache.kv;
  w.slot_mapping = p.cache.slot_mapping;
  w.key_token_stride = w.value_token_stride = p.qkv.out;
  w.key_head_stride = w.value_head_stride = p.head_dim;
  w.num_tokens = p.num_tokens;
  w.dtype = p.dtype;
  return w;
}

// paged_prefill_attention of the q rows (decode rows are chunks of one) into out [T, Hq, D].
//
// The chunks attend their new tokens as computed, the qkv rows themselves, and only their cached
// prefixes from the cache (vLLM's prefix prefill, which attends an fp8 cache's new tokens
// unquantised; on a cache of the stream's dtype both copies are the same values); a chunk of one
// token, a decode row, reads its token back from the cache, as the decode kernels do
// (paged::kMinOwnRowsChunk), on both backends alike.
inline paged::PagedPrefillParams prefill_params(const DecoderLayerParams& p, const void* qkv,
                                                void* out) {
  paged::PagedPrefillParams a{};
  a.query = qkv;
  a.kv = p.cache.kv;
  a.cu_seqlens_q = p.cache.cu_seqlens_q;
  a.alibi_slopes = nullptr;
  a.out = out;
  a.q_token_stride = p.qkv.out;
  a.q_head_stride = p.head_dim;
  const char* base = static_cast<const char*>(qkv);
  const int64_t e = element_size(p.dtype);
  a.new_key = base + p.heads_q * p.head_dim * e;
  a.new_value = base + (p.heads_q + p.heads_kv) * p.head_dim * e;
  a.new_key_token_stride = a.new_value_token_stride = p.qkv.out;
  a.new_key_head_stride = a.new_value_head_stride = p.head_dim;
  a.num_seqs = p.cache.num_seqs;
  a.num_tokens = p.num_tokens;
  a.heads_q = p.heads_q;
  a.max_seqlen_q = p.cache.max_seqlen_q;
  a.scale = p.scale;
  a.window_left = p.window_left;
  a.softcap = p.softcap;
  a.dtype = p.dtype;
  return a;
}

// Whether the step is decode rows only (one new token per sequence), which paged_attention's
// split-KV decode kernels take.
inline bool is_decode_batch(const DecoderLayerParams& p) {
  return p.cache.max_seqlen_q == 1 && p.cache.num_seqs == p.num_tokens;
}

// paged_attention of a decode batch's q rows into out [num_seqs, Hq, D]. The split-KV grid is
// sized by the longest context the block table can describe (table_stride * block_size): an
// upper bound that needs no device-to-host copy of the lengths, the same for every layer of the
// step (so the layers share one plan, cuda/paged/paged_attention.cu); ranges past a row's length
// exit at once.
inline paged::PagedAttentionParams decode_params(const DecoderLayerParams& p, const void* qkv,
                                                 void* out) {
  paged::PagedAttentionParams a{};
  a.query = qkv;
  a.kv = p.cache.kv;
  a.alibi_slopes = nullptr;
  a.out = out;
  a.q_seq_stride = p.qkv.out;
  a.q_head_stride = p.head_dim;
  a.num_seqs = p.cache.num_seqs;
  a.heads_q = p.heads_q;
  a.max_context_len = p.cache.kv.table_stride * p.cache.kv.block_size;
  a.scale = p.scale;
  a.window_left = p.window_left;
  a.softcap = p.softcap;
  a.dtype = p.dtype;
  return a;
}

}  // namespace djl_attn::decoder
