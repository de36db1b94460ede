// libdjl_attn_plans.so: the plans of the paged CUDA launchers (cuda/paged/paged_plan.h) for
// tests/test_plans_paged.py. Pointers are passed as addresses: only their alignment matters to
// a plan, and nothing is read through them.

#include <cstdint>
#include <exception>
#include <string>

#include "cuda/paged/paged_plan.h"
#include "tests/native/plan_exports.h"

using djl_attn::plan_exports::address;
using djl_attn::plan_exports::element_type_of;
using djl_attn::plan_exports::keep;

// The paged_attention plan for a GPU of `sm_count` SMs, `smem_optin` bytes of opt-in shared
// memory per block and compute capability cc_major.cc_minor. `kernel`, `config`:
// DJL_ATTN_PAGED_KERNEL and DJL_ATTN_PAGED_CONFIG values; `partition_size`:
// DJL_ATTN_PAGED_PARTITION. The query is
// [num_seqs, Hq, D] with strides (q_seq_stride, q_head_stride) at `query_address`; both caches
// start at `cache_address` and hold fp8 bytes when `fp8_cache` (the query's dtype otherwise); the
// output is allocated (aligned); `window_left` and `softcap` as the operator takes them.
// "error: ..." on failure.
extern "C" const char* djl_attn_test_paged_attention_plan(
    int64_t num_seqs, int64_t heads_q, int64_t heads_kv, int64_t head_dim, int64_t block_size,
    int64_t max_context_len, int32_t element_size, int32_t alibi, uint64_t query_address,
    int64_t q_seq_stride, int64_t q_head_stride, uint64_t cache_address, const char* kernel,
    const char* config, int64_t partition_size, int32_t sm_count, int64_t smem_optin,
    int32_t cc_major, int32_t cc_minor, int32_t fp8_cache, int64_t window_left, float softcap) {
  using namespace djl_attn::paged;
  try {
    DecodeOptions options;
    const auto request = decode_request_named(kernel);
    const auto stream_config = stream_config_named(config);
    if (!request) return keep(std::string("error: kernel: no such kernel '") + kernel + "'");
    if (!stream_config) return keep(std::string("error: config: no such config '") + config + "'");
    options.kernel = *request;
    options.config = *stream_config;
    options.partition_size = partition_size;
    static const float kSlope = 0.f;
    PagedAttentionParams p{};
    p.query = address(query_address);
    p.kv.key_cache = p.kv.value_cache = address(cache_address);
    p.alibi_slopes = alibi ? &kSlope : nullptr;
    p.out = address(0x10000);
    p.q_seq_stride = q_seq_stride;
    p.q_head_stride = q_head_stride;
    p.num_seqs = num_seqs;
    p.heads_q = heads_q;
    p.kv.heads_kv = heads_kv;
    p.kv.head_dim = head_dim;
    p.kv.block_size = block_size;
    p.kv.table_stride = (max_context_len + block_size - 1) / block_size;
    p.max_context_len = max_context_len;
    p.scale = 1.f;
    p.window_left = window_left;
    p.softcap = softcap;
    p.dtype = element_type_of(element_size);
    p.kv.cache_type = fp8_cache ? CacheType::kFp8E4M3 : CacheType::kQuery;
    // The flash decode kernel's residency as the occupancy API reports it on an H100/H200 (2
    // blocks of 4 warps per SM at D = 128); the split it sizes is not part of the description
    // (tests/test_plans_flash.py holds plan_decode_split).
    const DecodeResidency residency = [](const djl_attn::flash::DecodeKernel&) { return 2; };
    return keep(describe(plan_paged_attention(
        decode_problem(p), options, {sm_count, smem_optin, cc_major, cc_minor}, residency)));
  } catch (const std::exception& e) {
    return keep(std::string("error: ") + e.what());
  }
}

// The paged_prefill_attention grid: "grid=x,y,z".
extern "C" const char* djl_attn_test_paged_prefill_plan(int64_t num_seqs, int64_t heads_q,
                                                         int64_t max_seqlen_q) {
  using namespace djl_attn::paged;
  PagedPrefillParams p{};
  p.num_seqs = num_seqs;
  p.heads_q = heads_q;
  p.max_seqlen_q = max_seqlen_q;
  return keep(describe(plan_paged_prefill(p)));
}

// The reshape_and_cache plan: [T, Hkv, D] keys and values at `key_address` with strides
// (token_stride, head_stride), caches at `cache_address`, of fp8 bytes when `fp8_cache`.
extern "C" const char* djl_attn_test_reshape_and_cache_plan(
    int64_t tokens, int64_t heads_kv, int64_t head_dim, int32_t element_size,
    uint64_t key_address, int64_t token_stride, int64_t head_stride, uint64_t cache_address,
    int32_t fp8_cache) {
  using namespace djl_attn::paged;
  ReshapeAndCacheParams p{};
  p.key = p.value = address(key_address);
  p.kv.key_cache = p.kv.value_cache = address(cache_address);
  p.key_token_stride = p.value_token_stride = token_stride;
  p.key_head_stride = p.value_head_stride = head_stride;
  p.num_tokens = tokens;
  p.kv.heads_kv = heads_kv;
  p.kv.head_dim = head_dim;
  p.dtype = element_type_of(element_size);
  p.kv.cache_type = fp8_cache ? CacheType::kFp8E4M3 : CacheType::kQuery;
  return keep(describe(plan_reshape_and_cache(p)));
}
