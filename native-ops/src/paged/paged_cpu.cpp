#include "paged/paged_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

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
  int64_t limit;     // sees keys j < limit
  float slope;       // ALiBi slope of its head (0 without ALiBi)
};

// Where one (sequence, kv head) reads its keys and values.
template <typename T>
struct SequenceCache {
  const T* key_cache;       // [num_blocks, block_size, Hkv, D]
  const T* value_cache;     // [num_blocks, block_size, Hkv, D]
  const int32_t* table;     // [max_blocks] of this sequence
  int64_t kv_head;
  int64_t heads_kv;
  int64_t head_dim;
  int64_t block_size;
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

template <typename T>
void to_float_row(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
  }
}

// Attention of `rows` over the sequence's cached tokens: the cache is walked block by block,
// each block converted to float32 once for all rows, with an online softmax per row. Row r's
// query position is limit - 1, so its ALiBi bias for key j is slope * (j - (limit - 1)).
template <typename T>
void attend_rows(const SequenceCache<T>& c, const std::vector<Row<T>>& rows, float scale,
                 Workspace& ws) {
  const int64_t dim = c.head_dim, bs = c.block_size;
  const int64_t n_rows = static_cast<int64_t>(rows.size());
  ws.reserve(n_rows, dim, bs);
  int64_t max_limit = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const T* q = rows[r].q;
    float* qf = ws.q.data() + r * dim;
    // The scale is folded into the query once instead of into every score.
    for (int64_t d = 0; d < dim; ++d) qf[d] = to_float(q[d]) * scale;
    max_limit = std::max(max_limit, rows[r].limit);
  }
  std::fill(ws.acc.begin(), ws.acc.begin() + n_rows * dim, 0.f);
  std::fill(ws.row_max.begin(), ws.row_max.begin() + n_rows, kNegInf);
  std::fill(ws.row_sum.begin(), ws.row_sum.begin() + n_rows, 0.f);

  const int64_t token_stride = c.heads_kv * dim;
  for (int64_t start = 0; start < max_limit; start += bs) {
    const int64_t block = c.table[start / bs];
    const int64_t tokens = std::min(bs, max_limit - start);
    const T* kb = c.key_cache + block * bs * token_stride + c.kv_head * dim;
    const T* vb = c.value_cache + block * bs * token_stride + c.kv_head * dim;
    for (int64_t t = 0; t < tokens; ++t) {
      to_float_row(kb + t * token_stride, ws.k.data() + t * dim, dim);
      to_float_row(vb + t * token_stride, ws.v.data() + t * dim, dim);
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t visible = std::min(tokens, rows[r].limit - start);
      if (visible <= 0) continue;
      const float* qf = ws.q.data() + r * dim;
      float* s = ws.s.data();
      float block_max = kNegInf;
      const float slope = rows[r].slope;
      const int64_t position = rows[r].limit - 1;
      for (int64_t t = 0; t < visible; ++t) {
        s[t] = dot(qf, ws.k.data() + t * dim, dim);
        if (slope != 0.f) s[t] += slope * static_cast<float>(start + t - position);
        block_max = std::max(block_max, s[t]);
      }
      const float new_max = std::max(ws.row_max[r], block_max);
      // Online softmax: what was accumulated under the old maximum is rescaled.
      const float correction = std::exp(ws.row_max[r] - new_max);
      ws.row_max[r] = new_max;
      float* acc = ws.acc.data() + r * dim;
      float sum = 0.f;
      for (int64_t t = 0; t < visible; ++t) {
        const float w = std::exp(s[t] - new_max);
        sum += w;
        scale_add(acc, t == 0 ? correction : 1.f, w, ws.v.data() + t * dim, dim);
      }
      ws.row_sum[r] = ws.row_sum[r] * correction + sum;
    }
  }

  for (int64_t r = 0; r < n_rows; ++r) {
    // A row that sees no key (context 0) gets output 0.
    const float inv = ws.row_sum[r] > 0.f ? 1.f / ws.row_sum[r] : 0.f;
    const float* acc = ws.acc.data() + r * dim;
    T* out = rows[r].out;
    for (int64_t d = 0; d < dim; ++d) out[d] = from_float<T>(acc[d] * inv);
  }
}

template <typename T>
void reshape_and_cache_typed(const ReshapeAndCacheParams& p) {
  const int64_t dim = p.head_dim, token_stride = p.heads_kv * dim;
  const int64_t grain = p.num_tokens * token_stride < kInlineWork ? p.num_tokens : 64;
  parallel_for(p.num_tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = p.slot_mapping[t];
      if (slot < 0) continue;
      T* kc = static_cast<T*>(p.key_cache) + slot * token_stride;
      T* vc = static_cast<T*>(p.value_cache) + slot * token_stride;
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        const T* k = static_cast<const T*>(p.key) + t * p.key_token_stride + h * p.key_head_stride;
        const T* v =
            static_cast<const T*>(p.value) + t * p.value_token_stride + h * p.value_head_stride;
        std::memcpy(kc + h * dim, k, dim * sizeof(T));
        std::memcpy(vc + h * dim, v, dim * sizeof(T));
      }
    }
  });
}

template <typename T>
void paged_attention_typed(const PagedAttentionParams& p) {
  const int64_t group = p.heads_q / p.heads_kv;
  const int64_t tasks = p.num_seqs * p.heads_kv;
  int64_t work = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) work += p.context_lens[s];
  work *= p.heads_q * p.head_dim;
  const int64_t grain = work < kInlineWork ? tasks : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace ws;
    std::vector<Row<T>> rows(group);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t s = task / p.heads_kv, kv_head = task % p.heads_kv;
      const SequenceCache<T> cache{static_cast<const T*>(p.key_cache),
                                   static_cast<const T*>(p.value_cache),
                                   p.block_tables + s * p.max_blocks,
                                   kv_head, p.heads_kv, p.head_dim, p.block_size};
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kv_head * group + g;
        rows[g].q = static_cast<const T*>(p.query) + s * p.q_seq_stride + h * p.q_head_stride;
        rows[g].out = static_cast<T*>(p.out) + (s * p.heads_q + h) * p.head_dim;
        rows[g].limit = p.context_lens[s];
        rows[g].slope = p.alibi_slopes ? p.alibi_slopes[h] : 0.f;
      }
      attend_rows(cache, rows, p.scale, ws);
    }
  });
}

template <typename T>
void paged_prefill_typed(const PagedPrefillParams& p) {
  const int64_t group = p.heads_q / p.heads_kv;
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
    work += (end - begin) * p.context_lens[s];
  }
  work *= p.heads_q * p.head_dim;
  const int64_t tasks = static_cast<int64_t>(tiles.size()) * p.heads_kv;
  const int64_t grain = work < kInlineWork ? std::max<int64_t>(tasks, 1) : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace ws;
    std::vector<Row<T>> rows;
    for (int64_t task = begin; task < end; ++task) {
      const Tile& tile = tiles[task / p.heads_kv];
      const int64_t kv_head = task % p.heads_kv;
      const int64_t s = tile.seq;
      const int64_t context = p.context_lens[s];
      const int64_t chunk_begin = p.cu_seqlens_q[s];
      const int64_t chunk = p.cu_seqlens_q[s + 1] - chunk_begin;
      const SequenceCache<T> cache{static_cast<const T*>(p.key_cache),
                                   static_cast<const T*>(p.value_cache),
                                   p.block_tables + s * p.max_blocks,
                                   kv_head, p.heads_kv, p.head_dim, p.block_size};
      rows.clear();
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = kv_head * group + g;
        for (int64_t r = tile.row_begin; r < tile.row_end; ++r) {
          Row<T> row;
          row.q = static_cast<const T*>(p.query) + r * p.q_token_stride + h * p.q_head_stride;
          row.out = static_cast<T*>(p.out) + (r * p.heads_q + h) * p.head_dim;
          // Row t of the chunk sits at position context - chunk + t and sees keys up to it.
          row.limit = context - chunk + (r - chunk_begin) + 1;
          row.slope = p.alibi_slopes ? p.alibi_slopes[h] : 0.f;
          rows.push_back(row);
        }
      }
      attend_rows(cache, rows, p.scale, ws);
    }
  });
}

}  // namespace

void run_reshape_and_cache_cpu(const ReshapeAndCacheParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return reshape_and_cache_typed<float>(params);
    case ElementType::kFloat16: return reshape_and_cache_typed<Half>(params);
    case ElementType::kBFloat16: return reshape_and_cache_typed<BFloat16>(params);
  }
}

void run_paged_attention_cpu(const PagedAttentionParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return paged_attention_typed<float>(params);
    case ElementType::kFloat16: return paged_attention_typed<Half>(params);
    case ElementType::kBFloat16: return paged_attention_typed<BFloat16>(params);
  }
}

void run_paged_prefill_cpu(const PagedPrefillParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return paged_prefill_typed<float>(params);
    case ElementType::kFloat16: return paged_prefill_typed<Half>(params);
    case ElementType::kBFloat16: return paged_prefill_typed<BFloat16>(params);
  }
}

}  // namespace djl_attn::paged
