#include "paged/paged_op.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"
#include "paged/paged_checks.h"

namespace djl_attn::paged {
namespace {

constexpr const char* kCacheOp = "reshape_and_cache";
constexpr const char* kDecodeOp = "paged_attention";
constexpr const char* kPrefillOp = "paged_prefill_attention";


// Query [rows, Hq, D]: rank, dtype, device, last dim.
void check_query(const char* op, const Tensor& query, const char* layout) {
  const ArgName qn{op, "query"};
  check_dim(query, qn, 3, layout);
  check_kernel_dtype(query, qn);
  check_supported_device(query, qn);
  check_last_dim_contiguous(query, qn);
}

// Query [rows, Hq, D] against the (checked) caches [.., .., Hkv, D]: heads and head dim.
void check_query_heads(const char* op, const Tensor& query, const Tensor& key_cache) {
  const int64_t dim = query.size(2);
  if (!is_supported_head_dim(dim)) {
    fail_invalid(op, ": query: expected a head dim D in [1, ", kMaxHeadDim, "], got ", dim);
  }
  check_size(key_cache, {op, "key_cache"}, 3, "D", dim, "the head dim of query");
  const int64_t heads_q = query.size(1), heads_kv = key_cache.size(2);
  if (heads_q % heads_kv != 0) {
    fail_invalid(op, ": key_cache: expected a number of heads Hkv that divides the query heads Hq = ",
                 heads_q, ", got Hkv = ", heads_kv);
  }
}

// alibi_slopes: float32 [Hq] (every sequence) or [num_seqs, Hq] (row s for sequence s, as
// flash_attention's [B, Hq]), contiguous, on the query's device. Returns the stride between the
// sequences' rows: 0 or Hq.
int64_t check_alibi(const char* op, const Tensor& slopes, const Tensor& query, int64_t num_seqs) {
  const ArgName name{op, "alibi_slopes"};
  const int64_t heads_q = query.size(1);
  if (slopes.dim() == 1) {
    check_size(slopes, name, 0, "Hq", heads_q, "the heads of query");
  } else if (slopes.dim() == 2) {
    check_size(slopes, name, 0, "num_seqs", num_seqs, "the sequences");
    check_size(slopes, name, 1, "Hq", heads_q, "the heads of query");
  } else {
    fail_invalid(name.prefix(), ": expected 1 dim [Hq] or 2 dims [num_seqs, Hq], got ",
                 slopes.dim());
  }
  check_dtype(slopes, name, DType::kFloat32);
  check_same_device(slopes, name, query, {op, "query"});
  check_contiguous(slopes, name);
  return slopes.dim() == 2 ? heads_q : 0;
}

// window_left >= -1 (-1: unbounded), softcap 0 (none) or a normal float32, as flash_attention
// takes them (common/check.h).
void check_features(const char* op, int64_t window_left, double softcap) {
  check_window_size({op, "window_left"}, window_left);
  checked_softcap(op, softcap);
}

// The chunks' own keys or values [T, Hkv, D] (`arg`: key or value) of paged_prefill_attention:
// the query's rows, dtype and device, the caches' heads and head dim.
void check_chunk_rows(const Tensor& rows, const char* arg, const Tensor& query,
                      const Tensor& key_cache) {
  const ArgName name{kPrefillOp, arg};
  check_dim(rows, name, 3, "[T, Hkv, D]");
  check_size(rows, name, 0, "T", query.size(0), "the rows of query");
  check_size(rows, name, 1, "Hkv", key_cache.size(2), "the heads of key_cache");
  check_size(rows, name, 2, "D", query.size(2), "the head dim of query");
  check_same_dtype(rows, name, query, {kPrefillOp, "query"});
  check_same_device(rows, name, query, {kPrefillOp, "query"});
  check_last_dim_contiguous(rows, name);
}

}  // namespace

void reshape_and_cache_boxed(shim::StableIValue* stack, const PagedBackend& backend) {
  Tensor key = take_tensor(stack, 0);
  Tensor value = take_tensor(stack, 1);
  Tensor key_cache = take_tensor(stack, 2);
  Tensor value_cache = take_tensor(stack, 3);
  Tensor slot_mapping = take_tensor(stack, 4);
  const bool check_slots = read_bool(stack, 5);
  std::optional<Tensor> k_scale = take_optional_tensor(stack, 6);
  std::optional<Tensor> v_scale = take_optional_tensor(stack, 7);
  const bool fp8_e5m2 = read_bool(stack, 8);

  const ArgName kn{kCacheOp, "key"}, vn{kCacheOp, "value"}, sn{kCacheOp, "slot_mapping"};
  check_dim(key, kn, 3, "[T, Hkv, D]");
  check_dim(value, vn, 3, "[T, Hkv, D]");
  check_kernel_dtype(key, kn);
  check_supported_device(key, kn);
  check_same_dtype(value, vn, key, kn);
  check_same_device(value, vn, key, kn);
  check_last_dim_contiguous(key, kn);
  check_last_dim_contiguous(value, vn);
  const int64_t tokens = key.size(0), heads_kv = key.size(1), dim = key.size(2);
  check_size(value, vn, 0, "T", tokens, "the tokens of key");
  check_size(value, vn, 1, "Hkv", heads_kv, "the heads of key");
  check_size(value, vn, 2, "D", dim, "the head dim of key");
  const CacheType cache_type =
      check_caches(kCacheOp, key_cache, value_cache, key, kn, false, fp8_e5m2);
  const CacheScale ks = check_scale(kCacheOp, "k_scale", k_scale, key_cache, cache_type);
  const CacheScale vs = check_scale(kCacheOp, "v_scale", v_scale, key_cache, cache_type);
  check_size(key_cache, {kCacheOp, "key_cache"}, 2, "Hkv", heads_kv, "the heads of key");
  check_size(key_cache, {kCacheOp, "key_cache"}, 3, "D", dim, "the head dim of key");
  check_dim(slot_mapping, sn, 1, "[T]");
  check_size(slot_mapping, sn, 0, "T", tokens, "the tokens of key");
  check_dtype(slot_mapping, sn, DType::kInt64);
  check_same_device(slot_mapping, sn, key, kn);
  check_contiguous(slot_mapping, sn);

  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const int64_t slots = num_blocks * block_size;
  // Every slot is checked before anything is written: a bad call leaves the caches untouched.
  if (check_slots) {
    std::vector<int64_t> slot_values = host_buffer<int64_t>(slot_mapping);
    std::vector<float> k_scales = scale_buffer(k_scale), v_scales = scale_buffer(v_scale);
    copy_to_host(backend.copy_to_host,
                 {copy_into(slot_values, slot_mapping), copy_scale(k_scales, k_scale),
                  copy_scale(v_scales, v_scale)});
    check_scale_values(kCacheOp, "k_scale", k_scales);
    check_scale_values(kCacheOp, "v_scale", v_scales);
    paged::check_slots(kCacheOp, slot_values.data(), static_cast<int64_t>(slot_values.size()), slots);
  }
  // The kernels skip negative slots.
  if (tokens == 0 || heads_kv == 0 || dim == 0) return;

  ReshapeAndCacheParams p{};
  p.key = key.data();
  p.value = value.data();
  p.kv = paged_kv(key_cache, value_cache, nullptr, nullptr, cache_type, ks, vs);
  p.slot_mapping = slot_mapping.data_as<int64_t>();
  p.key_token_stride = key.stride(0), p.key_head_stride = key.stride(1);
  p.value_token_stride = value.stride(0), p.value_head_stride = value.stride(1);
  p.num_tokens = tokens;
  p.dtype = element_type(key.dtype());
  backend.reshape_and_cache(p);
}

void paged_attention_boxed(shim::StableIValue* stack, const PagedBackend& backend) {
  Tensor query = take_tensor(stack, 0);
  Tensor key_cache = take_tensor(stack, 1);
  Tensor value_cache = take_tensor(stack, 2);
  Tensor block_tables = take_tensor(stack, 3);
  Tensor context_lens = take_tensor(stack, 4);
  const double scale = read_float(stack, 5);
  const int64_t max_context_len = read_int(stack, 6);
  std::optional<Tensor> alibi = take_optional_tensor(stack, 7);
  const bool check_indices = read_bool(stack, 8);
  std::optional<Tensor> k_scale = take_optional_tensor(stack, 9);
  std::optional<Tensor> v_scale = take_optional_tensor(stack, 10);
  const int64_t window_left = read_int(stack, 11);
  const double softcap = read_float(stack, 12);
  const bool fp8_e5m2 = read_bool(stack, 13);

  check_query(kDecodeOp, query, "[num_seqs, Hq, D]");
  const CacheType cache_type = check_caches(kDecodeOp, key_cache, value_cache, query,
                                            {kDecodeOp, "query"}, true, fp8_e5m2);
  const CacheScale ks = check_scale(kDecodeOp, "k_scale", k_scale, key_cache, cache_type);
  const CacheScale vs = check_scale(kDecodeOp, "v_scale", v_scale, key_cache, cache_type);
  check_query_heads(kDecodeOp, query, key_cache);
  const int64_t num_seqs = query.size(0), heads_q = query.size(1), dim = query.size(2);
  const int64_t alibi_seq_stride = alibi ? check_alibi(kDecodeOp, *alibi, query, num_seqs) : 0;
  check_index_tensor(kDecodeOp, block_tables, "block_tables", 2, "[num_seqs, max_blocks]",
                     DType::kInt32, query);
  check_size(block_tables, {kDecodeOp, "block_tables"}, 0, "num_seqs", num_seqs,
             "the sequences of query");
  check_index_tensor(kDecodeOp, context_lens, "context_lens", 1, "[num_seqs]", DType::kInt32,
                     query);
  check_size(context_lens, {kDecodeOp, "context_lens"}, 0, "num_seqs", num_seqs,
             "the sequences of query");
  check_qk_scale(kDecodeOp, scale);
  check_features(kDecodeOp, window_left, softcap);
  if (max_context_len < 0 || max_context_len > (int64_t{1} << 30)) {
    fail_invalid(kDecodeOp, ": max_context_len: expected a value in [0, 2^30], got ",
                 max_context_len);
  }

  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const int64_t max_blocks = block_tables.size(1);
  // The values of the index tensors, unless the caller vouches for them (check_indices=False:
  // the Java PagedBatch checked them once for the whole step) or already checked them.
  if (check_indices) {
    // One wait for both copies (the binding's only synchronisation).
    std::vector<int32_t> lens = host_buffer<int32_t>(context_lens);
    std::vector<int32_t> tables = host_buffer<int32_t>(block_tables);
    std::vector<float> k_scales = scale_buffer(k_scale), v_scales = scale_buffer(v_scale);
    copy_to_host(backend.copy_to_host,
                 {copy_into(lens, context_lens), copy_into(tables, block_tables),
                  copy_scale(k_scales, k_scale), copy_scale(v_scales, v_scale)});
    check_scale_values(kDecodeOp, "k_scale", k_scales);
    check_scale_values(kDecodeOp, "v_scale", v_scales);
    check_block_tables(kDecodeOp, lens, tables, max_blocks, block_size, num_blocks);
    for (size_t s = 0; s < lens.size(); ++s) {
      if (lens[s] > max_context_len) {
        fail_invalid(kDecodeOp, ": context_lens: expected values <= max_context_len = ",
                     max_context_len, ", got ", lens[s], " at index ", s);
      }
    }
  }

  Tensor out = Tensor::empty({num_seqs, heads_q, dim}, query.dtype(), query.device());
  if (num_seqs > 0 && heads_q > 0) {
    PagedAttentionParams p{};
    p.query = query.data();
    p.kv = paged_kv(key_cache, value_cache, &block_tables, &context_lens, cache_type, ks, vs);
    p.alibi_slopes = alibi ? alibi->data_as<float>() : nullptr;
    p.alibi_seq_stride = alibi_seq_stride;
    p.out = out.data();
    p.q_seq_stride = query.stride(0), p.q_head_stride = query.stride(1);
    p.num_seqs = num_seqs;
    p.heads_q = heads_q;
    p.max_context_len = max_context_len;
    p.scale = static_cast<float>(scale);
    p.window_left = window_left;
    p.softcap = static_cast<float>(softcap);
    p.dtype = element_type(query.dtype());
    backend.paged_attention(p);
  }
  put_tensor(stack, 0, std::move(out));
}

void paged_prefill_attention_boxed(shim::StableIValue* stack, const PagedBackend& backend) {
  Tensor query = take_tensor(stack, 0);
  Tensor key_cache = take_tensor(stack, 1);
  Tensor value_cache = take_tensor(stack, 2);
  Tensor block_tables = take_tensor(stack, 3);
  Tensor cu_seqlens_q = take_tensor(stack, 4);
  Tensor context_lens = take_tensor(stack, 5);
  const double scale = read_float(stack, 6);
  const int64_t max_seqlen_q = read_int(stack, 7);
  std::optional<Tensor> alibi = take_optional_tensor(stack, 8);
  const bool check_indices = read_bool(stack, 9);
  std::optional<Tensor> k_scale = take_optional_tensor(stack, 10);
  std::optional<Tensor> v_scale = take_optional_tensor(stack, 11);
  const int64_t window_left = read_int(stack, 12);
  const double softcap = read_float(stack, 13);
  const bool causal = read_bool(stack, 14);
  const int64_t window_right = read_int(stack, 15);
  std::optional<Tensor> new_key = take_optional_tensor(stack, 16);
  std::optional<Tensor> new_value = take_optional_tensor(stack, 17);
  const bool fp8_e5m2 = read_bool(stack, 18);

  check_query(kPrefillOp, query, "[T, Hq, D]");
  const CacheType cache_type = check_caches(kPrefillOp, key_cache, value_cache, query,
                                            {kPrefillOp, "query"}, true, fp8_e5m2);
  const CacheScale ks = check_scale(kPrefillOp, "k_scale", k_scale, key_cache, cache_type);
  const CacheScale vs = check_scale(kPrefillOp, "v_scale", v_scale, key_cache, cache_type);
  check_query_heads(kPrefillOp, query, key_cache);
  if (new_key.has_value() != new_value.has_value()) {
    fail_invalid(kPrefillOp, ": ", new_key ? "value" : "key",
                 ": expected a tensor when ", new_key ? "key" : "value",
                 " is given (the chunks' own keys and values go together), got None");
  }
  if (new_key) {
    check_chunk_rows(*new_key, "key", query, key_cache);
    check_chunk_rows(*new_value, "value", query, key_cache);
  }
  const int64_t tokens = query.size(0), heads_q = query.size(1), dim = query.size(2);
  check_index_tensor(kPrefillOp, context_lens, "context_lens", 1, "[num_seqs]", DType::kInt32,
                     query);
  const int64_t num_seqs = context_lens.size(0);
  const int64_t alibi_seq_stride = alibi ? check_alibi(kPrefillOp, *alibi, query, num_seqs) : 0;
  check_index_tensor(kPrefillOp, block_tables, "block_tables", 2, "[num_seqs, max_blocks]",
                     DType::kInt32, query);
  check_size(block_tables, {kPrefillOp, "block_tables"}, 0, "num_seqs", num_seqs,
             "the sequences of context_lens");
  check_index_tensor(kPrefillOp, cu_seqlens_q, "cu_seqlens_q", 1, "[num_seqs + 1]",
                     DType::kInt32, query);
  check_size(cu_seqlens_q, {kPrefillOp, "cu_seqlens_q"}, 0, "num_seqs + 1", num_seqs + 1,
             "the sequences of context_lens plus one");
  check_qk_scale(kPrefillOp, scale);
  check_features(kPrefillOp, window_left, softcap);
  check_window_size({kPrefillOp, "window_right"}, window_right);
  if (max_seqlen_q < 0 || max_seqlen_q > tokens) {
    fail_invalid(kPrefillOp, ": max_seqlen_q: expected a value in [0, T = ", tokens, "], got ",
                 max_seqlen_q);
  }

  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const int64_t max_blocks = block_tables.size(1);
  if (check_indices) {
    std::vector<int32_t> lens = host_buffer<int32_t>(context_lens);
    std::vector<int32_t> tables = host_buffer<int32_t>(block_tables);
    std::vector<int32_t> cu = host_buffer<int32_t>(cu_seqlens_q);
    std::vector<float> k_scales = scale_buffer(k_scale), v_scales = scale_buffer(v_scale);
    copy_to_host(backend.copy_to_host,
                 {copy_into(lens, context_lens), copy_into(tables, block_tables),
                  copy_into(cu, cu_seqlens_q), copy_scale(k_scales, k_scale),
                  copy_scale(v_scales, v_scale)});
    check_scale_values(kPrefillOp, "k_scale", k_scales);
    check_scale_values(kPrefillOp, "v_scale", v_scales);
    check_block_tables(kPrefillOp, lens, tables, max_blocks, block_size, num_blocks);
    // A chunk may be longer than its context (FlashAttention's Sq > Sk): its first rows sit
    // before the context's first key.
    check_chunks(kPrefillOp, cu, lens, tokens, max_seqlen_q, /*chunks_cached=*/false);
  }

  Tensor out = Tensor::empty({tokens, heads_q, dim}, query.dtype(), query.device());
  if (tokens > 0 && heads_q > 0) {
    PagedPrefillParams p{};
    p.query = query.data();
    p.kv = paged_kv(key_cache, value_cache, &block_tables, &context_lens, cache_type, ks, vs);
    p.cu_seqlens_q = cu_seqlens_q.data_as<int32_t>();
    p.alibi_slopes = alibi ? alibi->data_as<float>() : nullptr;
    p.alibi_seq_stride = alibi_seq_stride;
    p.out = out.data();
    p.q_token_stride = query.stride(0), p.q_head_stride = query.stride(1);
    if (new_key) {
      p.new_key = new_key->data();
      p.new_value = new_value->data();
      p.new_key_token_stride = new_key->stride(0), p.new_key_head_stride = new_key->stride(1);
      p.new_value_token_stride = new_value->stride(0);
      p.new_value_head_stride = new_value->stride(1);
    }
    p.num_seqs = num_seqs;
    p.num_tokens = tokens;
    p.heads_q = heads_q;
    p.max_seqlen_q = max_seqlen_q;
    p.scale = static_cast<float>(scale);
    p.window_left = window_left;
    // Causal calls see no key after their own: a right window has nothing to cut there.
    p.window_right = causal ? -1 : window_right;
    p.causal = causal;
    p.softcap = static_cast<float>(softcap);
    p.dtype = element_type(query.dtype());
    backend.paged_prefill(p);
  }
  put_tensor(stack, 0, std::move(out));
}

}  // namespace djl_attn::paged
