#include "paged/paged_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/fp8.h"
#include "common/half.h"
#include "common/thread_pool.h"

namespace djl_attn::paged {
namespace {

// Below this many multiply-adds a call runs on the calling thread: waking the pool costs more
// than it saves.
constexpr int64_t kInlineWork = 1 << 18;
// Prefill query rows per task: enough rows to reuse each converted cache block, few enough to
// spread one long chunk over the pool.
constexpr int64_t kPrefillTile = 32;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The storage types of an fp8 cache's elements (CacheType::kFp8E4M3, kFp8E5M2).
struct Fp8E4M3 {
  uint8_t bits;
  static float value(uint8_t b) { return fp8_e4m3_to_float(b); }
  static uint8_t encode(float x) { return float_to_fp8_e4m3(x); }
};
struct Fp8E5M2 {
  uint8_t bits;
  static float value(uint8_t b) { return fp8_e5m2_to_float(b); }
  static uint8_t encode(float x) { return float_to_fp8_e5m2(x); }
};

template <typename C>
constexpr bool kIsFp8 = std::is_same_v<C, Fp8E4M3> || std::is_same_v<C, Fp8E5M2>;

float scale_of(const CacheScale& scale, int64_t kv_head) {
  return scale.values != nullptr ? scale.values[kv_head * scale.head_stride] : 1.f;
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y = y * scale + w * x
__attribute__((target_clones("arch=x86-64-v3", "default")))
void scale_add(float* y, float scale, float w, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale + w * x[i];
}

// One query row of a task: its query vector, where its output goes, and what it sees.
template <typename T>
struct Row {
  const T* q;        // [D]
  T* out;            // [D]
  int64_t first;     // sees keys first <= j < limit (visible_span; limit <= first: none)
  int64_t limit;
  int64_t position;  // its position p, for the ALiBi term (limit - 1 when causal)
  float slope;       // ALiBi slope of its sequence and head (0 without ALiBi)

  void set_span(int64_t pos, int64_t context, int64_t window_left, int64_t window_right,
                bool causal) {
    const KeySpan span = visible_span(pos, context, window_left, window_right, causal);
    first = span.first;
    limit = span.end;
    position = pos;
  }
};

// Where one (sequence, kv head) reads its keys and values, elements of type C (the query's
// type, or fp8 bytes whose values are byte * scale).
template <typename C>
struct SequenceCache {
  const C* key_cache;       // [num_blocks, block_size, Hkv, D]
  const C* value_cache;     // [num_blocks, block_size, Hkv, D]
  const int32_t* table;     // [max_blocks] of this sequence
  int64_t kv_head;
  int64_t heads_kv;
  int64_t head_dim;
  int64_t block_size;
  float k_scale, v_scale;   // of this kv head; 1 unless C is an fp8 type
};

// A chunk's own keys and values as computed (PagedPrefillParams::new_key), for one (sequence,
// kv head): key position j >= first is row j - first of them instead of the cache's copy.
template <typename T>
struct ChunkRows {
  const T* key = nullptr;    // row 0's [D] of this kv head, or null: every key from the cache
  const T* value = nullptr;  // row 0's [D] of this kv head
  int64_t key_stride = 0, value_stride = 0;  // elements between rows
  int64_t first = 0;         // the position of row 0: context - chunk
};

struct Workspace {
  std::vector<float> q, acc, row_max, row_sum, k, v, s;
  void reserve(int64_t rows, int64_t dim, int64_t block_size) {
    q.resize(rows * dim);
    acc.resize(rows * dim);
    row_max.resize(rows);
    row_sum.resize(rows);
    k.resize(block_size * dim);
    v.resize(block_size * dim);
    s.resize(block_size);
  }
};

// A cache row as float32: its values (an fp8 row: each byte's value times the scale).
template <typename C>
void to_float_row(const C* src, float* dst, int64_t n, float scale) {
  if constexpr (std::is_same_v<C, float>) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if constexpr (kIsFp8<C>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = C::value(src[i].bits) * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
  }
}

// Attention of `rows` over the sequence's cached tokens: the cache is walked block by block from
// the first block any row sees (the window's left edge), each block converted to float32 once for
// all rows, with an online softmax per row. Row r's ALiBi bias for key j is
// alibi_bias(slope, j, position); softcap > 0 caps scale * q . k first. Keys
// from `chunk.first` on come from `chunk` when it has rows.
template <typename T, typename C>
void attend_rows(const SequenceCache<C>& c, const std::vector<Row<T>>& rows, float scale,
                 float softcap, Workspace& ws, const ChunkRows<T>& chunk = {}) {
  const int64_t dim = c.head_dim, bs = c.block_size;
  const int64_t n_rows = static_cast<int64_t>(rows.size());
  ws.reserve(n_rows, dim, bs);
  int64_t max_limit = 0, min_first = std::numeric_limits<int64_t>::max();
  for (int64_t r = 0; r < n_rows; ++r) {
    const T* q = rows[r].q;
    float* qf = ws.q.data() + r * dim;
    // The scale is folded into the query once instead of into every score.
    for (int64_t d = 0; d < dim; ++d) qf[d] = to_float(q[d]) * scale;
    // Rows that see nothing neither extend the walk nor move its start.
    if (rows[r].limit <= rows[r].first) continue;
    max_limit = std::max(max_limit, rows[r].limit);
    min_first = std::min(min_first, rows[r].first);
  }
  std::fill(ws.acc.begin(), ws.acc.begin() + n_rows * dim, 0.f);
  std::fill(ws.row_max.begin(), ws.row_max.begin() + n_rows, kNegInf);
  std::fill(ws.row_sum.begin(), ws.row_sum.begin() + n_rows, 0.f);

  const int64_t token_stride = c.heads_kv * dim;
  // Blocks wholly left of every row's window are never read.
  const int64_t first_block = max_limit > 0 ? min_first / bs : 0;
  for (int64_t start = first_block * bs; start < max_limit; start += bs) {
    const int64_t block = c.table[start / bs];
    const int64_t tokens = std::min(bs, max_limit - start);
    const C* kb = c.key_cache + block * bs * token_stride + c.kv_head * dim;
    const C* vb = c.value_cache + block * bs * token_stride + c.kv_head * dim;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t j = start + t;
      if (chunk.key != nullptr && j >= chunk.first) {
        // A new token of the chunk: its key and value as given, unquantised.
        to_float_row(chunk.key + (j - chunk.first) * chunk.key_stride, ws.k.data() + t * dim,
                     dim, 1.f);
        to_float_row(chunk.value + (j - chunk.first) * chunk.value_stride,
                     ws.v.data() + t * dim, dim, 1.f);
        continue;
      }
      to_float_row(kb + t * token_stride, ws.k.data() + t * dim, dim, c.k_scale);
      to_float_row(vb + t * token_stride, ws.v.data() + t * dim, dim, c.v_scale);
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      // Tokens [skipped, visible) of this block are in the row's range.
      const int64_t visible = std::min(tokens, rows[r].limit - start);
      const int64_t skipped = std::max<int64_t>(0, rows[r].first - start);
      if (visible <= skipped) continue;
      const float* qf = ws.q.data() + r * dim;
      float* s = ws.s.data();
      float block_max = kNegInf;
      const float slope = rows[r].slope;
      const int64_t position = rows[r].position;
      for (int64_t t = skipped; t < visible; ++t) {
        s[t] = dot(qf, ws.k.data() + t * dim, dim);
        if (softcap > 0.f) s[t] = softcap * std::tanh(s[t] / softcap);
        if (slope != 0.f) s[t] += alibi_bias(slope, start + t, position);
        block_max = std::max(block_max, s[t]);
      }
      const float new_max = std::max(ws.row_max[r], block_max);
      // Online softmax: what was accumulated under the old maximum is rescaled.
      const float correction = std::exp(ws.row_max[r] - new_max);
      ws.row_max[r] = new_max;
      float* acc = ws.acc.data() + r * dim;
      float sum = 0.f;
      for (int64_t t = skipped; t < visible; ++t) {
        const float w = std::exp(s[t] - new_max);
        sum += w;
        scale_add(acc, t == skipped ? correction : 1.f, w, ws.v.data() + t * dim, dim);
      }
      ws.row_sum[r] = ws.row_sum[r] * correction + sum;
    }
  }

  for (int64_t r = 0; r < n_rows; ++r) {
    // A row that sees no key (context 0, a causal row before the first key) gets output 0.
    const float inv = ws.row_sum[r] > 0.f ? 1.f / ws.row_sum[r] : 0.f;
    const float* acc = ws.acc.data() + r * dim;
    T* out = rows[r].out;
    for (int64_t d = 0; d < dim; ++d) out[d] = from_float<T>(acc[d] * inv);
  }
}

// Copies (C = T) or quantises (C an fp8 type: byte = sat(rne(x / scale))) one row of D values.
template <typename T, typename C>
void store_row(const T* src, C* dst, int64_t n, float scale) {
  if constexpr (kIsFp8<C>) {
    for (int64_t i = 0; i < n; ++i) dst[i].bits = C::encode(to_float(src[i]) / scale);
  } else {
    std::memcpy(dst, src, n * sizeof(T));
  }
}

template <typename T, typename C>
void reshape_and_cache_typed(const ReshapeAndCacheParams& p) {
  const int64_t dim = p.kv.head_dim, token_stride = p.kv.heads_kv * dim;
  const int64_t grain = p.num_tokens * token_stride < kInlineWork ? p.num_tokens : 64;
  parallel_for(p.num_tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = p.slot_mapping[t];
      if (slot < 0) continue;
      C* kc = static_cast<C*>(p.kv.key_cache) + slot * token_stride;
      C* vc = static_cast<C*>(p.kv.value_cache) + slot * token_stride;
      for (int64_t h = 0; h < p.kv.heads_kv; ++h) {
        const T* k = static_cast<const T*>(p.key) + t * p.key_token_stride + h * p.key_head_stride;
        const T* v =
            static_cast<const T*>(p.value) + t * p.value_token_stride + h * p.value_head_stride;
        store_row(k, kc + h * dim, dim, scale_of(p.kv.k_scale, h));
        store_row(v, vc + h * dim, dim, scale_of(p.kv.v_scale, h));
      }
    }
  });
}

template <typename T, typename C>
void paged_attention_typed(const PagedAttentionParams& p) {
  const int64_t group = p.heads_q / p.kv.heads_kv;
  const int64_t tasks = p.num_seqs * p.kv.heads_kv;
  int64_t work = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) work += p.kv.context_lens[s];
  work *= p.heads_q * p.kv.head_dim;
  const int64_t grain = work < kInlineWork ? tasks : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace ws;
    std::vector<Row<T>> rows(group);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t s = task / p.kv.heads_kv, kv_head = task % p.kv.heads_kv;
      const SequenceCache<C> cache{static_cast<const C*>(p.kv.key_cache),
                                   static_cast<const C*>(p.kv.value_cache),
                                   p.kv.block_tables + s * p.kv.table_stride,
                                   kv_head, p.kv.heads_kv, p.kv.head_dim, p.kv.block_size,
                                   scale_of(p.kv.k_scale, kv_head), scale_of(p.kv.v_scale, kv_head)};
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kv_head * group + g;
        rows[g].q = static_cast<const T*>(p.query) + s * p.q_seq_stride + h * p.q_head_stride;
        rows[g].out = static_cast<T*>(p.out) + (s * p.heads_q + h) * p.kv.head_dim;
        const int64_t context = p.kv.context_lens[s];
        rows[g].set_span(context - 1, context, p.window_left, -1, true);
        rows[g].slope = alibi_slope(p, s, h);
      }
      attend_rows<T, C>(cache, rows, p.scale, p.softcap, ws);
    }
  });
}

template <typename T, typename C>
void paged_prefill_typed(const PagedPrefillParams& p) {
  const int64_t group = p.heads_q / p.kv.heads_kv;
  // Tasks: (sequence, first row of a tile) for every tile, times every kv head.
  struct Tile {
    int64_t seq, row_begin, row_end;
  };
  std::vector<Tile> tiles;
  int64_t work = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t begin = p.cu_seqlens_q[s], end = p.cu_seqlens_q[s + 1];
    for (int64_t r = begin; r < end; r += kPrefillTile) {
      tiles.push_back({s, r, std::min(end, r + kPrefillTile)});
    }
    work += (end - begin) * p.kv.context_lens[s];
  }
  work *= p.heads_q * p.kv.head_dim;
  const int64_t tasks = static_cast<int64_t>(tiles.size()) * p.kv.heads_kv;
  const int64_t grain = work < kInlineWork ? std::max<int64_t>(tasks, 1) : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace ws;
    std::vector<Row<T>> rows;
    for (int64_t task = begin; task < end; ++task) {
      const Tile& tile = tiles[task / p.kv.heads_kv];
      const int64_t kv_head = task % p.kv.heads_kv;
      const int64_t s = tile.seq;
      const int64_t context = p.kv.context_lens[s];
      const int64_t chunk_begin = p.cu_seqlens_q[s];
      const int64_t chunk = p.cu_seqlens_q[s + 1] - chunk_begin;
      const SequenceCache<C> cache{static_cast<const C*>(p.kv.key_cache),
                                   static_cast<const C*>(p.kv.value_cache),
                                   p.kv.block_tables + s * p.kv.table_stride,
                                   kv_head, p.kv.heads_kv, p.kv.head_dim, p.kv.block_size,
                                   scale_of(p.kv.k_scale, kv_head), scale_of(p.kv.v_scale, kv_head)};
      rows.clear();
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kv_head * group + g;
        for (int64_t r = tile.row_begin; r < tile.row_end; ++r) {
          Row<T> row;
          row.q = static_cast<const T*>(p.query) + r * p.q_token_stride + h * p.q_head_stride;
          row.out = static_cast<T*>(p.out) + (r * p.heads_q + h) * p.kv.head_dim;
          // Row t of the chunk sits at position context - chunk + t (bottom-right aligned).
          row.set_span(context - chunk + (r - chunk_begin), context, p.window_left,
                       p.window_right, p.causal);
          row.slope = alibi_slope(p, s, h);
          rows.push_back(row);
        }
      }
      ChunkRows<T> own;
      if (p.new_key != nullptr && chunk >= kMinOwnRowsChunk && chunk <= context) {
        own.key = static_cast<const T*>(p.new_key) + chunk_begin * p.new_key_token_stride +
                  kv_head * p.new_key_head_stride;
        own.value = static_cast<const T*>(p.new_value) + chunk_begin * p.new_value_token_stride +
                    kv_head * p.new_value_head_stride;
        own.key_stride = p.new_key_token_stride;
        own.value_stride = p.new_value_token_stride;
        own.first = context - chunk;
      }
      attend_rows<T, C>(cache, rows, p.scale, p.softcap, ws, own);
    }
  });
}

// F<T, C> for the query (key) dtype T; C: the fp8 storage type, or void for T itself.
template <template <typename, typename> class F, typename Params, typename Fp8>
void dispatch_dtype(const Params& p) {
  using F32 = std::conditional_t<std::is_void_v<Fp8>, float, Fp8>;
  using F16 = std::conditional_t<std::is_void_v<Fp8>, Half, Fp8>;
  using BF16 = std::conditional_t<std::is_void_v<Fp8>, BFloat16, Fp8>;
  switch (p.dtype) {
    case ElementType::kFloat32: return F<float, F32>::run(p);
    case ElementType::kFloat16: return F<Half, F16>::run(p);
    case ElementType::kBFloat16: return F<BFloat16, BF16>::run(p);
  }
}

// Runs F<T, C> for the query (key) dtype T and the cache's element type C.
template <template <typename, typename> class F, typename Params>
void dispatch(const Params& p) {
  switch (p.kv.cache_type) {
    case CacheType::kQuery: return dispatch_dtype<F, Params, void>(p);
    case CacheType::kFp8E4M3: return dispatch_dtype<F, Params, Fp8E4M3>(p);
    case CacheType::kFp8E5M2: return dispatch_dtype<F, Params, Fp8E5M2>(p);
  }
}

template <typename T, typename C>
struct ReshapeAndCache {
  static void run(const ReshapeAndCacheParams& p) { reshape_and_cache_typed<T, C>(p); }
};
template <typename T, typename C>
struct PagedAttention {
  static void run(const PagedAttentionParams& p) { paged_attention_typed<T, C>(p); }
};
template <typename T, typename C>
struct PagedPrefill {
  static void run(const PagedPrefillParams& p) { paged_prefill_typed<T, C>(p); }
};

}  // namespace

void run_reshape_and_cache_cpu(const ReshapeAndCacheParams& params) {
  dispatch<ReshapeAndCache>(params);
}

void run_paged_attention_cpu(const PagedAttentionParams& params) {
  dispatch<PagedAttention>(params);
}

void run_paged_prefill_cpu(const PagedPrefillParams& params) { dispatch<PagedPrefill>(params); }

}  // namespace djl_attn::paged
