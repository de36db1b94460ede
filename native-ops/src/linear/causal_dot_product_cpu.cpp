#include "linear/causal_dot_product_cpu.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"

namespace djl_attn::linear {
namespace {

// Steps per chunk. The intra-chunk product costs kChunk / 2 multiply-adds per step and feature,
// the state E * M per step, so 64 keeps the quadratic part small next to the state for E, M >= 64
// while the chunk buffers (64 x 256 floats each) stay in L1/L2.
constexpr int64_t kChunk = 64;
// Below this many multiply-adds a problem runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kInlineWork = 1 << 18;

// Copies `rows` rows of `dim` elements into a dense float32 buffer.
template <typename T>
void load_rows(const T* src, int64_t src_stride, int64_t rows, int64_t dim, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * src_stride;
    float* out = dst + r * dim;
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(out, row, dim * sizeof(float));
    } else {
      for (int64_t d = 0; d < dim; ++d) out[d] = to_float(row[d]);
    }
  }
}

// s[r][c] = q_r . k_c for c <= r and 0 above the diagonal (the causal mask of one chunk). Cloned
// for AVX2+FMA so the loops vectorise where the CPU has them, with a baseline x86-64 version for
// the rest.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void chunk_scores(const float* q, const float* k, int64_t rows, int64_t dim_qk, float* s) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * dim_qk;
    for (int64_t c = 0; c <= r; ++c) {
      const float* kc = k + c * dim_qk;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t e = 0; e < dim_qk; ++e) sum += qr[e] * kc[e];
      s[r * kChunk + c] = sum;
    }
    for (int64_t c = r + 1; c < rows; ++c) s[r * kChunk + c] = 0.f;
  }
}

// c[r][n] += sum_k a[r][k] b[k][n] (row-major, leading dims in elements). Blocks of 4 rows by 16
// columns keep their sums in eight AVX registers while b's rows stream through, so b is read
// once per 4 rows instead of once per row; the state products were bound by exactly that.
constexpr int64_t kRowBlock = 4;
constexpr int64_t kColBlock = 16;

__attribute__((target_clones("arch=x86-64-v3", "default")))
void gemm_accumulate(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                     int64_t ldc, int64_t rows, int64_t inner, int64_t cols) {
  const int64_t full_cols = cols / kColBlock * kColBlock;
  int64_t r0 = 0;
  for (; r0 + kRowBlock <= rows; r0 += kRowBlock) {
    for (int64_t n0 = 0; n0 < full_cols; n0 += kColBlock) {
      float acc[kRowBlock][kColBlock] = {};
      for (int64_t k = 0; k < inner; ++k) {
        const float* bk = b + k * ldb + n0;
        for (int64_t i = 0; i < kRowBlock; ++i) {
          const float w = a[(r0 + i) * lda + k];
#pragma omp simd
          for (int64_t n = 0; n < kColBlock; ++n) acc[i][n] += w * bk[n];
        }
      }
      for (int64_t i = 0; i < kRowBlock; ++i) {
        float* cr = c + (r0 + i) * ldc + n0;
#pragma omp simd
        for (int64_t n = 0; n < kColBlock; ++n) cr[n] += acc[i][n];
      }
    }
  }
  // Leftover rows (all columns) and leftover columns (of the blocked rows), one row at a time.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n_begin = r < r0 ? full_cols : 0;
    if (n_begin == cols) continue;
    float* cr = c + r * ldc;
    for (int64_t k = 0; k < inner; ++k) {
      const float w = a[r * lda + k];
      const float* bk = b + k * ldb;
#pragma omp simd
      for (int64_t n = n_begin; n < cols; ++n) cr[n] += w * bk[n];
    }
  }
}

// acc = mask(q k^T) v + q state: the intra-chunk part plus the contribution of every step before
// the chunk.
void chunk_outputs(const float* s, const float* q, const float* v, const float* state,
                   int64_t rows, int64_t dim_qk, int64_t dim_v, float* acc) {
  std::fill(acc, acc + rows * dim_v, 0.f);
  gemm_accumulate(s, kChunk, v, dim_v, acc, dim_v, rows, rows, dim_v);
  gemm_accumulate(q, dim_qk, state, dim_v, acc, dim_v, rows, dim_qk, dim_v);
}

// state += k^T v over the chunk's rows, through a transposed copy of k ([E][kChunk]).
void chunk_update_state(const float* k, const float* v, int64_t rows, int64_t dim_qk,
                        int64_t dim_v, float* k_transposed, float* state) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < dim_qk; ++e) k_transposed[e * kChunk + r] = k[r * dim_qk + e];
  }
  gemm_accumulate(k_transposed, kChunk, v, dim_v, state, dim_v, dim_qk, rows, dim_v);
}

struct Workspace {
  std::vector<float> q, k, k_transposed, v, s, acc, state;
  Workspace(int64_t dim_qk, int64_t dim_v)
      : q(kChunk * dim_qk), k(kChunk * dim_qk), k_transposed(dim_qk * kChunk), v(kChunk * dim_v),
        s(kChunk * kChunk), acc(kChunk * dim_v), state(dim_qk * dim_v) {}
};

// Pointers to one (batch, head).
template <typename T>
struct Head {
  const T* q;
  const T* k;
  const T* v;
  T* out;
};

template <typename T>
Head<T> head_of(const CausalDotProductParams& p, int64_t bh) {
  const int64_t b = bh / p.heads, h = bh % p.heads;
  return {static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride,
          static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride,
          static_cast<const T*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride,
          static_cast<T*>(p.out) + b * p.out_batch_stride + h * p.out_head_stride};
}

// Adds sum_{t in [begin, end)} k_t v_t^T to ws.state (the prefix pass of a segment).
template <typename T>
void accumulate_state(const CausalDotProductParams& p, const Head<T>& head, int64_t begin,
                      int64_t end, Workspace& ws) {
  for (int64_t c0 = begin; c0 < end; c0 += kChunk) {
    const int64_t rows = std::min(kChunk, end - c0);
    load_rows(head.k + c0 * p.k_seq_stride, p.k_seq_stride, rows, p.dim_qk, ws.k.data());
    load_rows(head.v + c0 * p.v_seq_stride, p.v_seq_stride, rows, p.dim_v, ws.v.data());
    chunk_update_state(ws.k.data(), ws.v.data(), rows, p.dim_qk, p.dim_v, ws.k_transposed.data(),
                       ws.state.data());
  }
}

// Outputs for steps [begin, end), starting from the state of all steps before `begin` held in
// ws.state.
template <typename T>
void run_segment(const CausalDotProductParams& p, const Head<T>& head, int64_t begin, int64_t end,
                 Workspace& ws) {
  for (int64_t c0 = begin; c0 < end; c0 += kChunk) {
    const int64_t rows = std::min(kChunk, end - c0);
    load_rows(head.q + c0 * p.q_seq_stride, p.q_seq_stride, rows, p.dim_qk, ws.q.data());
    load_rows(head.k + c0 * p.k_seq_stride, p.k_seq_stride, rows, p.dim_qk, ws.k.data());
    load_rows(head.v + c0 * p.v_seq_stride, p.v_seq_stride, rows, p.dim_v, ws.v.data());
    chunk_scores(ws.q.data(), ws.k.data(), rows, p.dim_qk, ws.s.data());
    chunk_outputs(ws.s.data(), ws.q.data(), ws.v.data(), ws.state.data(), rows, p.dim_qk,
                  p.dim_v, ws.acc.data());
    // The last chunk of a segment leaves a state nobody reads.
    if (c0 + rows < end) {
      chunk_update_state(ws.k.data(), ws.v.data(), rows, p.dim_qk, p.dim_v, ws.k_transposed.data(),
                       ws.state.data());
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* out_row = head.out + (c0 + r) * p.out_seq_stride;
      const float* ar = ws.acc.data() + r * p.dim_v;
      for (int64_t m = 0; m < p.dim_v; ++m) out_row[m] = from_float<T>(ar[m]);
    }
  }
}

template <typename T>
void run_typed(const CausalDotProductParams& p) {
  const int64_t heads = p.batch * p.heads;
  const int64_t chunks = (p.seqlen + kChunk - 1) / kChunk;
  const int64_t state_size = p.dim_qk * p.dim_v;
  const int64_t work =
      heads * p.seqlen * ((p.dim_qk + p.dim_v) * std::min(kChunk, p.seqlen) / 2 + 2 * state_size);
  const int64_t threads = get_num_threads();

  // Segments of L per head: enough that every thread has one, each a whole number of chunks.
  int64_t segments = 1;
  if (work >= kInlineWork && heads < threads) {
    segments = std::min(chunks, (threads + heads - 1) / heads);
  }
  if (segments <= 1) {
    const int64_t grain = work < kInlineWork ? heads : 1;
    parallel_for(heads, grain, [&](int64_t begin, int64_t end) {
      Workspace ws(p.dim_qk, p.dim_v);
      for (int64_t bh = begin; bh < end; ++bh) {
        std::fill(ws.state.begin(), ws.state.end(), 0.f);
        run_segment<T>(p, head_of<T>(p, bh), 0, p.seqlen, ws);
      }
    });
    return;
  }

  const int64_t segment_len = (chunks + segments - 1) / segments * kChunk;
  segments = (p.seqlen + segment_len - 1) / segment_len;
  // Prefix pass: the state contributed by each segment but the last, [heads][segments - 1][E*M].
  std::vector<float> sums(heads * (segments - 1) * state_size);
  parallel_for(heads * (segments - 1), 1, [&](int64_t begin, int64_t end) {
    Workspace ws(p.dim_qk, p.dim_v);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / (segments - 1), seg = task % (segments - 1);
      std::fill(ws.state.begin(), ws.state.end(), 0.f);
      accumulate_state<T>(p, head_of<T>(p, bh), seg * segment_len, (seg + 1) * segment_len, ws);
      std::copy(ws.state.begin(), ws.state.end(), sums.begin() + task * state_size);
    }
  });
  parallel_for(heads * segments, 1, [&](int64_t begin, int64_t end) {
    Workspace ws(p.dim_qk, p.dim_v);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / segments, seg = task % segments;
      // The starting state is the sum of the earlier segments' contributions.
      std::fill(ws.state.begin(), ws.state.end(), 0.f);
      for (int64_t prev = 0; prev < seg; ++prev) {
        const float* src = sums.data() + (bh * (segments - 1) + prev) * state_size;
        float* dst = ws.state.data();
        for (int64_t i = 0; i < state_size; ++i) dst[i] += src[i];
      }
      run_segment<T>(p, head_of<T>(p, bh), seg * segment_len,
                     std::min(p.seqlen, (seg + 1) * segment_len), ws);
    }
  });
}

}  // namespace

void run_causal_dot_product_cpu(const CausalDotProductParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params);
    case ElementType::kFloat16: return run_typed<Half>(params);
    case ElementType::kBFloat16: return run_typed<BFloat16>(params);
  }
}

}  // namespace djl_attn::linear
