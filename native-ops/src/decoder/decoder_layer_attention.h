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
  const PagedCacheView& c = p.cache;
  const char* base = static_cast<const char*>(qkv);
  const int64_t e = element_size(p.dtype);
  paged::ReshapeAndCacheParams w{};
  w.key = base + p.heads_q * p.head_dim * e;
  w.value = base + (p.heads_q + p.heads_kv) * p.head_dim * e;
  w.key_cache = c.key_cache;
  w.value_cache = c.value_cache;
  w.slot_mapping = c.slot_mapping;
  w.key_token_stride = w.value_token_stride = p.qkv.out;
  w.key_head_stride = w.value_head_stride = p.head_dim;
  w.num_tokens = p.num_tokens;
  w.heads_kv = p.heads_kv;
  w.head_dim = p.head_dim;
  w.block_size = c.block_size;
  w.num_blocks = c.num_blocks;
  w.dtype = p.dtype;
  w.cache_type = c.cache_type;
  w.k_scale = c.k_scale;
  w.v_scale = c.v_scale;
  return w;
}

// paged_prefill_attention of the q rows (decode rows are chunks of one) into out [T, Hq, D].
inline paged::PagedPrefillParams prefill_params(const DecoderLayerParams& p, const void* qkv,
                                                void* out) {
  const PagedCacheView& c = p.cache;
  paged::PagedPrefillParams a{};
  a.query = qkv;
  a.key_cache = c.key_cache;
  a.value_cache = c.value_cache;
  a.block_tables = c.block_tables;
  a.cu_seqlens_q = c.cu_seqlens_q;
  a.context_lens = c.context_lens;
  a.alibi_slopes = nullptr;
  a.out = out;
  a.q_token_stride = p.qkv.out;
  a.q_head_stride = p.head_dim;
  a.num_seqs = c.num_seqs;
  a.num_tokens = p.num_tokens;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.head_dim = p.head_dim;
  a.block_size = c.block_size;
  a.num_blocks = c.num_blocks;
  a.max_blocks = c.max_blocks;
  a.max_seqlen_q = c.max_seqlen_q;
  a.scale = p.scale;
  a.window_left = p.window_left;
  a.softcap = p.softcap;
  a.dtype = p.dtype;
  a.cache_type = c.cache_type;
  a.k_scale = c.k_scale;
  a.v_scale = c.v_scale;
  return a;
}

// Whether the step is decode rows only (one new token per sequence), which paged_attention's
// split-KV decode kernels take.
inline bool is_decode_batch(const DecoderLayerParams& p) {
  return p.cache.max_seqlen_q == 1 && p.cache.num_seqs == p.num_tokens;
}

// paged_attention of a decode batch's q rows into out [num_seqs, Hq, D]. The split-KV grid is
// sized by the longest context the block table can describe (max_blocks * block_size): an upper
// bound that needs no device-to-host copy of the lengths; ranges past a row's length exit at once.
inline paged::PagedAttentionParams decode_params(const DecoderLayerParams& p, const void* qkv,
                                                 void* out) {
  const PagedCacheView& c = p.cache;
  paged::PagedAttentionParams a{};
  a.query = qkv;
  a.key_cache = c.key_cache;
  a.value_cache = c.value_cache;
  a.block_tables = c.block_tables;
  a.context_lens = c.context_lens;
  a.alibi_slopes = nullptr;
  a.out = out;
  a.q_seq_stride = p.qkv.out;
  a.q_head_stride = p.head_dim;
  a.num_seqs = c.num_seqs;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.head_dim = p.head_dim;
  a.block_size = c.block_size;
  a.num_blocks = c.num_blocks;
  a.max_blocks = c.max_blocks;
  a.max_context_len = c.max_blocks * c.block_size;
  a.scale = p.scale;
  a.window_left = p.window_left;
  a.softcap = p.softcap;
  a.dtype = p.dtype;
  a.cache_type = c.cache_type;
  a.k_scale = c.k_scale;
  a.v_scale = c.v_scale;
  return a;
}

}  // namespace djl_attn::decoder
