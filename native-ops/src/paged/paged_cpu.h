// The paged KV cache operators on the CPU.
#pragma once

#include "paged/paged_params.h"

namespace djl_attn::paged {

// Copies each token's key and value rows into its slot (an fp8 cache: quantised with the
// scales, common/fp8.h); parallel over tokens.
void run_reshape_and_cache_cpu(const ReshapeAndCacheParams& params);

// Decode attention through the block tables: parallel over (sequence, kv head); each task walks
// the sequence's cache blocks once, converting a block's keys and values to float32 once for all
// the query heads that share the kv head, with an online softmax per query head.
void run_paged_attention_cpu(const PagedAttentionParams& params);

// Chunked-prefill attention through the block tables, the same way, parallel over
// (sequence, kv head, tile of query rows).
void run_paged_prefill_cpu(const PagedPrefillParams& params);

}  // namespace djl_attn::paged
