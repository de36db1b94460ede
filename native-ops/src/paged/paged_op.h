// The bindings of the paged KV cache operators: read the boxed arguments, validate them once for
// every caller (Java, Python, TorchScript), allocate outputs and hand a params struct to a
// device backend. The CPU library and the CUDA library register them with their own backend.
#pragma once

#include <cstddef>

#include "paged/paged_params.h"
#include "shim/torch_shim.h"

namespace djl_attn::paged {

struct PagedBackend {
  // Each runs on a validated, non-empty problem; outputs are allocated.
  void (*reshape_and_cache)(const ReshapeAndCacheParams& params);
  void (*paged_attention)(const PagedAttentionParams& params);
  void (*paged_prefill)(const PagedPrefillParams& params);
  // Copies every range of device memory to the host (to range-check indices), waiting once for
  // all of them, or null when the backend's memory is host memory.
  void (*copy_to_host)(const HostCopy* copies, size_t count);
};

// reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache,
//                   Tensor slot_mapping, bool check_slots=True, Tensor? k_scale=None,
//                   Tensor? v_scale=None, bool fp8_e5m2=False) -> ()
//
// The caches hold the dtype of key/value, or fp8 bytes (paged_params.h, CacheType): e4m3fn in a
// uint8 or float8_e4m3fn cache, e5m2 in a float8_e5m2 cache or a uint8 one with fp8_e5m2=True
// (every operator that reads the cache takes the same flag), with optional float32 scales [1]
// or [Hkv] (absent: 1), which the attention operators take too.
//
// check_slots / check_indices=False: the caller vouches for the index values (slots, block ids,
// context lengths and offsets), which are then not copied to the host and checked (on CUDA that
// copy is a synchronisation per call). The Java PagedKvCache passes False for a PagedBatch it
// built and checked once for the step; every shape, dtype and device rule still applies.
void reshape_and_cache_boxed(shim::StableIValue* stack, const PagedBackend& backend);

// paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables,
//                 Tensor context_lens, float scale, int max_context_len, Tensor? alibi_slopes,
//                 bool check_indices=True, Tensor? k_scale=None, Tensor? v_scale=None,
//                 int window_left=-1, float softcap=0., bool fp8_e5m2=False) -> Tensor
//
// alibi_slopes: float32 [Hq], or [num_seqs, Hq] (row s for sequence s) for both operators.
void paged_attention_boxed(shim::StableIValue* stack, const PagedBackend& backend);

// paged_prefill_attention(Tensor query, Tensor key_cache, Tensor value_cache,
//                         Tensor block_tables, Tensor cu_seqlens_q, Tensor context_lens,
//                         float scale, int max_seqlen_q, Tensor? alibi_slopes,
//                         bool check_indices=True, Tensor? k_scale=None,
//                         Tensor? v_scale=None, int window_left=-1, float softcap=0.,
//                         bool causal=True, int window_right=-1, Tensor? key=None,
//                         Tensor? value=None, bool fp8_e5m2=False) -> Tensor
//
// causal=False: FlashAttention's non-causal rows (every key of the sequence, or with
// window_right >= 0 the keys up to position + window_right); a chunk may be longer than its
// context (Sq > Sk, bottom-right aligned: causal rows before the first key give 0).
//
// key / value: the chunks' own keys and values [T, Hkv, D] (as given to reshape_and_cache), both
// or neither. Given, each chunk of two or more tokens held by its context attends its own tokens
// from them and only its cached prefix from the cache (vLLM's prefix prefill: on an fp8 cache
// the new tokens are not read back quantised); a chunk of one, a decode row, reads its token
// from the cache, as paged_attention does (paged_params.h, kMinOwnRowsChunk).
void paged_prefill_attention_boxed(shim::StableIValue* stack, const PagedBackend& backend);

}  // namespace djl_attn::paged
