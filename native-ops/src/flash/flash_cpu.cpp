#include "flash/flash_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"

namespace djl_attn::flash {
namespace {

// Query rows per task and keys per tile. 32 x 64 float32 scores (8 KiB) plus the query, key and
// value tiles stay inside L2 for D up to 256.
constexpr int64_t kBlockM = 32;
constexpr int64_t kBlockN = 64;
// Below this many multiply-adds a problem runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kInlineWork = 1 << 18;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Rows of float32 values: either the input itself (float32 inputs) or a converted copy.
struct Rows {
  const float* data;
  int64_t stride;  // elements between consecutive rows
};

// `bias` (null for none) is added to every element, so biased inputs always take the copy.
template <typename T>
Rows load_rows(const T* src, int64_t src_stride, int64_t rows, int64_t dim, const T* bias,
               float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    if (bias == nullptr) return {src, src_stride};
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * src_stride;
    float* dst = buffer + r * dim;
    for (int64_t d = 0; d < dim; ++d) dst[d] = to_float(row[d]);
    if (bias != nullptr) {
      for (int64_t d = 0; d < dim; ++d) dst[d] += to_float(bias[d]);
    }
  }
  return {buffer, dim};
}

// s[r][c] = q[r] . k[c] for one tile. Cloned for AVX2+FMA so the dot products vectorise where
// the CPU has them, with a baseline x86-64 version for the rest.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void tile_scores(const float* q, int64_t rows, Rows k, int64_t cols, int64_t dim, float* s) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * dim;
    for (int64_t c = 0; c < cols; ++c) {
      const float* kc = k.data + c * k.stride;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t d = 0; d < dim; ++d) sum += qr[d] * kc[d];
      s[r * kBlockN + c] = sum;
    }
  }
}

// acc[r] += sum_c p[r][c] * v[c] for one tile.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void tile_accumulate(const float* p, int64_t rows, Rows v, int64_t cols, int64_t dim, float* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    float* ar = acc + r * dim;
    for (int64_t c = 0; c < cols; ++c) {
      float pc = p[r * kBlockN + c];
      if (pc == 0.f) continue;
      const float* vc = v.data + c * v.stride;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) ar[d] += pc * vc[d];
    }
  }
}

struct Workspace {
  std::vector<float> q, k, v, s, acc, row_max, row_sum;
  explicit Workspace(int64_t dim)
      : q(kBlockM * dim), k(kBlockN * dim), v(kBlockN * dim), s(kBlockM * kBlockN),
        acc(kBlockM * dim), row_max(kBlockM), row_sum(kBlockM) {}
};

// One query tile of one (batch, head): rows [m0, m0 + rows).
template <typename T>
void attend_tile(const FlashParams& p, int64_t b, int64_t h, int64_t m0, Workspace& ws) {
  const int64_t dim = p.head_dim;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t q_row0 = varlen ? p.cu_seqlens_q[b] : 0;
  const int64_t k_row0 = varlen ? p.cu_seqlens_k[b] : 0;
  const int64_t seqlen_q = varlen ? p.cu_seqlens_q[b + 1] - q_row0 : p.seqlen_q;
  if (m0 >= seqlen_q) return;  // varlen: this sequence is shorter than the longest
  const int64_t rows = std::min(kBlockM, seqlen_q - m0);
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t kv_len = varlen ? p.cu_seqlens_k[b + 1] - k_row0
                                : (p.kv_lens ? p.kv_lens[b] : p.seqlen_k);
  // Query row i sees keys j <= i + diagonal (bottom-right aligned causal mask).
  const int64_t diagonal = kv_len - seqlen_q;

  // Keys this tile needs at all: the causal limit of its last row.
  int64_t key_end = kv_len;
  if (p.causal) key_end = std::clamp<int64_t>(m0 + rows - 1 + diagonal + 1, 0, kv_len);

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + q_row0 * p.q_seq_stride +
               h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + k_row0 * p.k_seq_stride +
               h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + k_row0 * p.v_seq_stride +
               h_kv * p.v_head_stride;
  const T* q_bias = p.q_bias ? static_cast<const T*>(p.q_bias) + h * dim : nullptr;
  const T* k_bias = p.k_bias ? static_cast<const T*>(p.k_bias) + h_kv * dim : nullptr;
  const T* v_bias = p.v_bias ? static_cast<const T*>(p.v_bias) + h_kv * dim : nullptr;

  // The scale is folded into the query once instead of into every score.
  float* q_tile = ws.q.data();
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = q + (m0 + r) * p.q_seq_stride;
    for (int64_t d = 0; d < dim; ++d) {
      const float bias = q_bias ? to_float(q_bias[d]) : 0.f;
      q_tile[r * dim + d] = (to_float(row[d]) + bias) * p.scale;
    }
  }
  float* acc = ws.acc.data();
  float* row_max = ws.row_max.data();
  float* row_sum = ws.row_sum.data();
  std::fill(acc, acc + rows * dim, 0.f);
  std::fill(row_max, row_max + rows, kNegInf);
  std::fill(row_sum, row_sum + rows, 0.f);

  float* s = ws.s.data();
  for (int64_t n0 = 0; n0 < key_end; n0 += kBlockN) {
    const int64_t cols = std::min(kBlockN, key_end - n0);
    Rows k_rows =
        load_rows(k + n0 * p.k_seq_stride, p.k_seq_stride, cols, dim, k_bias, ws.k.data());
    Rows v_rows =
        load_rows(v + n0 * p.v_seq_stride, p.v_seq_stride, cols, dim, v_bias, ws.v.data());
    tile_scores(q_tile, rows, k_rows, cols, dim, s);

    for (int64_t r = 0; r < rows; ++r) {
      float* sr = s + r * kBlockN;
      // Keys past this row's causal limit are masked; the tile loop already stopped at the
      // last row's limit, so only rows above it need this.
      int64_t visible = cols;
      if (p.causal) visible = std::clamp<int64_t>(m0 + r + diagonal + 1 - n0, 0, cols);
      float tile_max = kNegInf;
      for (int64_t c = 0; c < visible; ++c) tile_max = std::max(tile_max, sr[c]);
      for (int64_t c = visible; c < cols; ++c) sr[c] = 0.f;
      if (tile_max == kNegInf) {
        // Nothing visible in this tile for this row: contributes exp(-inf) = 0 everywhere.
        for (int64_t c = 0; c < visible; ++c) sr[c] = 0.f;
        continue;
      }
      const float new_max = std::max(row_max[r], tile_max);
      // Online softmax: rescale what was accumulated under the old maximum.
      const float correction = std::exp(row_max[r] - new_max);
      row_max[r] = new_max;
      float sum = 0.f;
      for (int64_t c = 0; c < visible; ++c) {
        sr[c] = std::exp(sr[c] - new_max);
        sum += sr[c];
      }
      row_sum[r] = row_sum[r] * correction + sum;
      if (correction != 1.f) {
        float* ar = acc + r * dim;
        for (int64_t d = 0; d < dim; ++d) ar[d] *= correction;
      }
    }
    tile_accumulate(s, rows, v_rows, cols, dim, acc);
  }

  // The division by the softmax sum is deferred to here, once per row.
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + q_row0 * p.out_seq_stride +
           h * p.out_head_stride;
  float* lse = p.lse + lse_offset(p, b, h);
  for (int64_t r = 0; r < rows; ++r) {
    T* out_row = out + (m0 + r) * p.out_seq_stride;
    const float* ar = acc + r * dim;
    if (row_sum[r] == 0.f) {
      // A row that sees no key (kv_len 0, or above the causal diagonal): output 0, and the
      // log of an empty sum.
      for (int64_t d = 0; d < dim; ++d) out_row[d] = from_float<T>(0.f);
      lse[m0 + r] = kNegInf;
      continue;
    }
    const float inv_sum = 1.f / row_sum[r];
    for (int64_t d = 0; d < dim; ++d) out_row[d] = from_float<T>(ar[d] * inv_sum);
    lse[m0 + r] = row_max[r] + std::log(row_sum[r]);
  }
}

template <typename T>
void run_typed(const FlashParams& p) {
  const int64_t m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
  const int64_t tasks = p.batch * p.heads_q * m_blocks;
  const int64_t work = p.batch * p.heads_q * p.seqlen_q * p.seqlen_k * p.head_dim;
  const int64_t grain = work < kInlineWork ? tasks : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace ws(p.head_dim);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t m_block = t % m_blocks;
      const int64_t bh = t / m_blocks;
      attend_tile<T>(p, bh / p.heads_q, bh % p.heads_q, m_block * kBlockM, ws);
    }
  });
}

}  // namespace

void run_flash_attention_cpu(const FlashParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params);
    case ElementType::kFloat16: return run_typed<Half>(params);
    case ElementType::kBFloat16: return run_typed<BFloat16>(params);
  }
}

}  // namespace djl_attn::flash
