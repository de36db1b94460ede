#include "paged/paged_checks.h"

#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/error.h"

namespace djl_attn::paged {

void copy_to_host(CopyIndicesToHost copy, std::initializer_list<HostCopy> copies) {
  if (copy != nullptr) {
    copy(copies.begin(), copies.size());
    return;
  }
  for (const HostCopy& c : copies) {
    if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
  }
}

// The dtypes that hold an fp8 cache: DJL has no fp8 dtype and passes uint8, as vLLM stores its
// fp8 caches; torch.float8_e4m3fn and torch.float8_e5m2 name the bytes' format too.
bool is_fp8_dtype(DType dtype) {
  return dtype == DType::kUInt8 || dtype == DType::kFloat8E4M3FN || dtype == DType::kFloat8E5M2;
}

// The rules both caches follow: [num_blocks, block_size, Hkv, D], contiguous, on the device of
// `ref` (the query or the new keys), of its dtype or both fp8 of one dtype, supported sizes when
// `attention`. Returns what they store.
CacheType check_caches(const char* op, const Tensor& key_cache, const Tensor& value_cache,
                       const Tensor& ref, ArgName ref_name, bool attention, bool fp8_e5m2) {
  const ArgName kc{op, "key_cache"}, vc{op, "value_cache"};
  check_dim(key_cache, kc, 4, "[num_blocks, block_size, Hkv, D]");
  check_dim(value_cache, vc, 4, "[num_blocks, block_size, Hkv, D]");
  check_size(value_cache, vc, 0, "num_blocks", key_cache.size(0), "the blocks of key_cache");
  check_size(value_cache, vc, 1, "block_size", key_cache.size(1), "the block size of key_cache");
  check_size(value_cache, vc, 2, "Hkv", key_cache.size(2), "the heads of key_cache");
  check_size(value_cache, vc, 3, "D", key_cache.size(3), "the head dim of key_cache");
  const bool fp8 = is_fp8_dtype(key_cache.dtype());
  if (fp8) {
    check_same_dtype(value_cache, vc, key_cache, kc);
  } else {
    check_same_dtype(key_cache, kc, ref, ref_name);
    check_same_dtype(value_cache, vc, ref, ref_name);
  }
  check_same_device(key_cache, kc, ref, ref_name);
  check_same_device(value_cache, vc, ref, ref_name);
  check_contiguous(key_cache, kc);
  check_contiguous(value_cache, vc);
  const int64_t block_size = key_cache.size(1);
  if (attention) {
    if (!is_supported_block_size(block_size)) {
      fail_invalid(kc.prefix(), ": expected a block size in ", list_str(kBlockSizes), ", got ",
                   block_size);
    }
  } else if (block_size < 1) {
    fail_invalid(kc.prefix(), ": expected a block size >= 1, got ", block_size);
  }
  if (key_cache.size(2) < 1) {
    fail_invalid(kc.prefix(), ": expected Hkv >= 1, got ", key_cache.size(2));
  }
  // A uint8 cache's format is the flag's; a float8 tensor's is its dtype's, which the flag must
  // not contradict.
  const DType dtype = key_cache.dtype();
  if (fp8_e5m2 && dtype != DType::kUInt8 && dtype != DType::kFloat8E5M2) {
    fail_invalid(op, ": fp8_e5m2: expected False for a ", key_cache.dtype_str(),
                 " cache (True says a uint8 cache holds e5m2 bytes), got True");
  }
  if (!fp8) return CacheType::kQuery;
  return fp8_e5m2 || dtype == DType::kFloat8E5M2 ? CacheType::kFp8E5M2 : CacheType::kFp8E4M3;
}

// k_scale / v_scale: only with an fp8 cache; float32 [1] (per tensor) or [Hkv] (per head),
// contiguous, on the cache's device. Absent: 1.
CacheScale check_scale(const char* op, const char* arg, const std::optional<Tensor>& scale,
                       const Tensor& key_cache, CacheType cache_type) {
  if (!scale) return {nullptr, 0};
  const ArgName name{op, arg};
  if (!is_fp8(cache_type)) {
    fail_invalid(name.prefix(), ": expected no scale for a ", key_cache.dtype_str(),
                 " cache (scales apply to fp8 caches: uint8, float8_e4m3fn or float8_e5m2), got "
                 "a tensor");
  }
  check_dim(*scale, name, 1, "[1] or [Hkv]");
  const int64_t heads_kv = key_cache.size(2), n = scale->size(0);
  if (n != 1 && n != heads_kv) {
    fail_invalid(name.prefix(), ": expected size 1 (per tensor) or Hkv = ", heads_kv,
                 " (per head) at dim 0, got ", n);
  }
  check_dtype(*scale, name, DType::kFloat32);
  check_same_device(*scale, name, key_cache, {op, "key_cache"});
  check_contiguous(*scale, name);
  return {scale->data_as<float>(), n == 1 ? 0 : 1};
}

// The host buffer of an optional scale's values (empty when absent), filled by the same batched
// copy as the index tensors.
std::vector<float> scale_buffer(const std::optional<Tensor>& scale) {
  return scale ? host_buffer<float>(*scale) : std::vector<float>{};
}

HostCopy copy_scale(std::vector<float>& dst, const std::optional<Tensor>& scale) {
  return scale ? copy_into(dst, *scale) : HostCopy{nullptr, nullptr, 0};
}

// k_scale / v_scale values: finite and > 0. A scale of 0 would quantise to NaN bytes (0 / 0) or
// saturate every value, a negative one flip signs: refused, like the indices, before any kernel.
void check_scale_values(const char* op, const char* arg, const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] <= 0.f) {
      fail_invalid(op, ": ", arg, ": expected finite values > 0, got ", values[i], " at index ",
                   i);
    }
  }
}

void check_index_tensor(const char* op, const Tensor& t, const char* arg, int64_t dims,
                        const char* layout, DType dtype, const Tensor& ref, const char* ref_arg) {
  const ArgName name{op, arg};
  check_dim(t, name, dims, layout);
  check_dtype(t, name, dtype);
  check_same_device(t, name, ref, {op, ref_arg});
  check_contiguous(t, name);
}

// Context lengths within [0, max_blocks * block_size] and the blocks each sequence uses within
// [0, num_blocks): the kernels then never read outside the caches or the table.
void check_block_tables(const char* op, const int32_t* context_lens, int64_t num_seqs,
                        const int32_t* tables, int64_t max_blocks, int64_t block_size,
                        int64_t num_blocks) {
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t len = context_lens[s];
    if (len < 0 || len > max_blocks * block_size) {
      fail_invalid(op, ": context_lens: expected values in [0, max_blocks * block_size = ",
                   max_blocks * block_size, "], got ", len, " at index ", s);
    }
    const int64_t used = (len + block_size - 1) / block_size;
    for (int64_t i = 0; i < used; ++i) {
      const int64_t id = tables[s * max_blocks + i];
      if (id < 0 || id >= num_blocks) {
        fail_invalid(op, ": block_tables: expected block ids in [0, num_blocks = ", num_blocks,
                     ") for the ", used, " blocks sequence ", s, " uses, got ", id, " at [", s,
                     ", ", i, "]");
      }
    }
  }
}

// The kernels skip negative slots; a slot past the caches would write outside them.
void check_slots(const char* op, const int64_t* slot_mapping, int64_t num_tokens,
                 int64_t num_slots) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (slot_mapping[t] >= num_slots) {
      fail_invalid(op, ": slot_mapping: expected slots < num_blocks * block_size = ", num_slots,
                   " (or negative to skip), got ", slot_mapping[t], " at index ", t);
    }
  }
}

void check_chunks(const char* op, const std::vector<int32_t>& cu,
                  const std::vector<int32_t>& lens, int64_t tokens, int64_t max_seqlen_q,
                  bool chunks_cached) {
  const int64_t num_seqs = static_cast<int64_t>(lens.size());
  const ArgName cn{op, "cu_seqlens_q"};
  if (cu[0] != 0) fail_invalid(cn.prefix(), ": expected 0 at index 0, got ", cu[0]);
  if (cu[num_seqs] != tokens) {
    fail_invalid(cn.prefix(), ": expected the last value to be T = ", tokens,
                 " (the rows of query), got ", cu[num_seqs]);
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) {
      fail_invalid(cn.prefix(), ": expected non-decreasing values, got ", cu[s], " then ",
                   cu[s + 1], " at index ", s);
    }
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t n = int64_t{cu[s + 1]} - cu[s];
    if (n > max_seqlen_q) {
      fail_invalid(op, ": max_seqlen_q: expected >= every chunk length, got ",
                   max_seqlen_q, " < ", n, " for sequence ", s);
    }
    if (chunks_cached && n > lens[s]) {
      fail_invalid(op, ": context_lens: expected each context to hold its chunk of new "
                   "tokens (cache them first), got ", lens[s], " < ", n, " for sequence ", s);
    }
  }
}

PagedKv paged_kv(const Tensor& key_cache, const Tensor& value_cache, const Tensor* block_tables,
                 const Tensor* context_lens, CacheType cache_type, CacheScale k_scale,
                 CacheScale v_scale) {
  PagedKv kv{};
  kv.key_cache = key_cache.data();
  kv.value_cache = value_cache.data();
  kv.block_tables = block_tables != nullptr ? block_tables->data_as<int32_t>() : nullptr;
  kv.context_lens = context_lens != nullptr ? context_lens->data_as<int32_t>() : nullptr;
  kv.table_stride = block_tables != nullptr ? block_tables->size(1) : 0;
  kv.num_blocks = key_cache.size(0);
  kv.block_size = key_cache.size(1);
  kv.heads_kv = key_cache.size(2);
  kv.head_dim = key_cache.size(3);
  kv.cache_type = cache_type;
  kv.k_scale = k_scale;
  kv.v_scale = v_scale;
  return kv;
}

}  // namespace djl_attn::paged
