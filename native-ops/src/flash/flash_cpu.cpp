#include "flash/flash_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "common/half.h"
#include "common/options.h"
#include "common/thread_pool.h"

// The kernel is written once over GCC vector types of W floats and compiled three times: for
// AVX-512 (W = 16), AVX2+FMA (W = 8) and baseline x86-64 (W = 4), picked at run time. The wide
// vector types only ever live inside functions compiled for the matching target (every helper
// is force-inlined into those), so GCC's note on passing them between functions does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#define DJL_FLASH_INLINE inline __attribute__((always_inline))

namespace djl_attn::flash {
namespace {

// Query rows per task and keys per tile. The transposed query, score and output tiles are
// 16 KiB each at D = 64 (48 KiB: L1/L2; keys and values stream from the input); at D = 256
// they stay well inside a 1 MiB L2.
constexpr int64_t kBlockM = 64;
constexpr int64_t kBlockN = 64;
// Head dims are zero-padded to a multiple of two vectors: the widest is 2 x 16 floats.
constexpr int64_t kDimAlign = 32;
// Query tiles with fewer rows than this (decode) take plain dot products: the register-blocked
// kernel computes a whole vector of queries at once, mostly padding for one or two rows.
constexpr int64_t kDirectRows = 4;
// Below this many multiply-adds a problem runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kInlineWork = 1 << 18;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

template <int W>
struct Vec;
template <>
struct Vec<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef int32_t I __attribute__((vector_size(16)));
  // Register block of the micro-kernels: kRows keys (Q.K) or query rows (P.V) x 2 vectors.
  // 6 x 2 accumulators, two loaded vectors and one broadcast fill 15 of the 16 registers.
  static constexpr int kRows = 6;
};
template <>
struct Vec<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
  static constexpr int kRows = 6;
};
template <>
struct Vec<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
  // 8 x 2 accumulators of the 32 zmm registers: 8 divides the 64-row tiles evenly, and 16 FMAs
  // per 10 loads keep both FMA pipes busy.
  static constexpr int kRows = 8;
};

template <class V>
DJL_FLASH_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <class V>
DJL_FLASH_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}

template <class V>
DJL_FLASH_INLINE V splat(float x) {
  return V{} + x;
}

template <int W, class V>
DJL_FLASH_INLINE float hsum(V v) {
  float s = 0.f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

// exp(x) for x <= 0 (softmax arguments: score minus the running maximum), to about 1 ulp.
// x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its degree-7 Taylor polynomial (truncation error
// below 1e-8 relative), times 2^n built in the exponent bits. Arguments below -87.3, where the
// result would be subnormal, and -inf give 0; nan gives nan.
template <int W>
DJL_FLASH_INLINE typename Vec<W>::F exp_nonpositive(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const F lowest = splat<F>(-87.3f);
  // nan is not below: it stays nan, so a nan score poisons its row as it does in torch.
  const I underflow = x < lowest;
  x = underflow ? lowest : x;
  // Adding 1.5 * 2^23 rounds x / ln2 to the nearest integer, which lands in the low mantissa
  // bits of t.
  const F magic = splat<F>(12582912.f);
  const F t = x * splat<F>(1.44269504088896341f) + magic;
  const F n = t - magic;
  // ln 2 split in two so that n times the high part is exact for |n| <= 127.
  F r = x - n * splat<F>(0.693359375f);
  r = r - n * splat<F>(-2.12194440e-4f);
  F poly = splat<F>(1.f / 5040.f);
  poly = poly * r + splat<F>(1.f / 720.f);
  poly = poly * r + splat<F>(1.f / 120.f);
  poly = poly * r + splat<F>(1.f / 24.f);
  poly = poly * r + splat<F>(1.f / 6.f);
  poly = poly * r + splat<F>(0.5f);
  poly = poly * r + splat<F>(1.f);
  poly = poly * r + splat<F>(1.f);
  // Casts between vector types of one size reinterpret the bits.
  const I n_int = (I)t - (I)magic;
  const I pow2_bits = (n_int + 127) << 23;
  const F result = poly * (F)pow2_bits;
  return underflow ? F{} : result;
}

// Scores are held transposed, st[c][r] for key c and query r ([kBlockN][kBlockM]): the online
// softmax then runs down the columns with whole vectors of queries (no horizontal reductions),
// and the query tile is transposed once per task instead of the key tile once per key tile.

// st[c][r0 .. r0 + NV W) = k[c] . qt[.][r0 ..] for R keys: the R x NV accumulators stay in
// registers across the whole D loop; each key element is broadcast once per query block.
template <int W, int R, int NV>
DJL_FLASH_INLINE void qk_keys(const float* k, int64_t k_stride, int64_t dim, const float* qt,
                              int64_t r_end, float* st) {
  using F = typename Vec<W>::F;
  for (int64_t r0 = 0; r0 < r_end; r0 += NV * W) {
    F a[R][NV];
#pragma GCC unroll 16
    for (int c = 0; c < R; ++c)
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) a[c][j] = F{};
    const float* qp = qt + r0;
    for (int64_t d = 0; d < dim; ++d, qp += kBlockM) {
      F qv[NV];
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) qv[j] = load<F>(qp + j * W);
#pragma GCC unroll 16
      for (int c = 0; c < R; ++c) {
        // A scalar times a vector: GCC broadcasts it straight from memory into the FMA
        // (splat's 0 + x would stay a scalar add, 0 + -0 being +0).
        const float kb = k[c * k_stride + d];
#pragma GCC unroll 2
        for (int j = 0; j < NV; ++j) a[c][j] += kb * qv[j];
      }
    }
#pragma GCC unroll 16
    for (int c = 0; c < R; ++c)
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) store(st + c * kBlockM + r0 + j * W, a[c][j]);
  }
}

// The last keys of a tile (fewer than a full register block) take a smaller block; a query
// range of at most one vector takes single-vector blocks.
template <int W, int R>
DJL_FLASH_INLINE void qk_block(int keys, const float* k, int64_t k_stride, int64_t dim,
                               const float* qt, int64_t rows, float* st) {
  if constexpr (R > 0) {
    if (keys == R) {
      if (rows <= W) return qk_keys<W, R, 1>(k, k_stride, dim, qt, W, st);
      return qk_keys<W, R, 2>(k, k_stride, dim, qt, round_up(rows, 2 * W), st);
    }
    return qk_block<W, R - 1>(keys, k, k_stride, dim, qt, rows, st);
  }
}

// acc[r] = acc[r] * correction[r] + sum_c p[r][c] v[c] for R query rows, one 2W-wide chunk of D
// at a time, the chunk's accumulators held in registers across all keys of the tile. The
// online softmax rescale rides along with the load of the accumulators. p[r][c] is at
// p[r * p_row + c * p_col]: either score layout.
template <int W, int R>
DJL_FLASH_INLINE void pv_rows(const float* p, int64_t p_row, int64_t p_col, int64_t cols,
                              const float* v, int64_t v_stride, float* acc, int64_t dp,
                              const float* correction) {
  using F = typename Vec<W>::F;
  for (int64_t d0 = 0; d0 < dp; d0 += 2 * W) {
    F a0[R], a1[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F c = splat<F>(correction[r]);
      a0[r] = load<F>(acc + r * dp + d0) * c;
      a1[r] = load<F>(acc + r * dp + d0 + W) * c;
    }
    const float* vp = v + d0;
    const float* pp = p;
    for (int64_t c = 0; c < cols; ++c, vp += v_stride, pp += p_col) {
      const F v0 = load<F>(vp);
      const F v1 = load<F>(vp + W);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const float pb = pp[r * p_row];
        a0[r] += pb * v0;
        a1[r] += pb * v1;
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      store(acc + r * dp + d0, a0[r]);
      store(acc + r * dp + d0 + W, a1[r]);
    }
  }
}

template <int W, int R>
DJL_FLASH_INLINE void pv_block(int rows, const float* p, int64_t p_row, int64_t p_col,
                               int64_t cols, const float* v, int64_t v_stride, float* acc,
                               int64_t dp, const float* correction) {
  if constexpr (R > 0) {
    if (rows == R) return pv_rows<W, R>(p, p_row, p_col, cols, v, v_stride, acc, dp, correction);
    return pv_block<W, R - 1>(rows, p, p_row, p_col, cols, v, v_stride, acc, dp, correction);
  }
}

// Where a key tile sits: query row m0 + r is at sequence position m0 + r + diagonal, key column
// c is key n0 + c. The sliding window, soft-capping and ALiBi (FlashParams) need it.
struct TilePlace {
  int64_t m0, n0, diagonal, kv_len;
  float slope;  // the head's ALiBi slope, 0 without ALiBi
};

// The window's mask and the soft-cap and ALiBi of visible scores, in place, for one query row
// (`s` its `cols` scores of the tile at `c_stride`). Called only for calls that use them: the
// default path keeps its loops as they were.
DJL_FLASH_INLINE void modify_row(const FlashParams& p, const TilePlace& at, int64_t r,
                                 int64_t cols, float* s, int64_t c_stride) {
  const int64_t pos = at.m0 + r + at.diagonal;
  const RowKeys<int64_t> keys = row_keys(p, pos, at.kv_len);
  for (int64_t c = 0; c < cols; ++c) {
    float& x = s[c * c_stride];
    const int64_t j = at.n0 + c;
    if (x == kNegInf || j < keys.lo || j > keys.hi) {
      x = kNegInf;
    } else {
      x = modify_score(x, p.softcap, at.slope, static_cast<float>(pos > j ? pos - j : j - pos));
    }
  }
}

// Scores and online softmax of a tile of a few query rows (decode), in row-major layout
// s[r][c] ([rows][kBlockN]): dot products against key rows zero-padded to dp, one row at a time.
// `limit0` is the causal limit of row 0 relative to the tile (row r sees keys c < limit0 + r).
template <int W>
DJL_FLASH_INLINE void attend_direct(const FlashParams& p, const TilePlace& at, int64_t rows,
                                    int64_t limit0, int64_t cols, const float* q, int64_t dp,
                                    const float* k, int64_t k_stride, float* s, float* row_max,
                                    float* row_sum, float* correction) {
  using F = typename Vec<W>::F;
  const bool features = has_flash_features(p);
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * dp;
    float* sr = s + r * kBlockN;
    const int64_t visible = p.causal ? std::clamp<int64_t>(limit0 + r, 0, cols) : cols;
    float tile_max = kNegInf;
    for (int64_t c = 0; c < visible; ++c) {
      const float* kc = k + c * k_stride;
      F a0 = F{}, a1 = F{};
      for (int64_t d = 0; d < dp; d += 2 * W) {
        a0 += load<F>(qr + d) * load<F>(kc + d);
        a1 += load<F>(qr + d + W) * load<F>(kc + d + W);
      }
      sr[c] = hsum<W>(a0 + a1);
      tile_max = std::max(tile_max, sr[c]);
    }
    if (features) {
      modify_row(p, at, r, visible, sr, 1);
      tile_max = kNegInf;
      for (int64_t c = 0; c < visible; ++c) tile_max = std::max(tile_max, sr[c]);
    }
    for (int64_t c = visible; c < kBlockN; ++c) sr[c] = kNegInf;
    const float new_max = std::max(row_max[r], tile_max);
    if (new_max == kNegInf) {
      // Nothing visible yet for this row: this tile contributes exp(-inf) = 0 everywhere.
      std::fill(sr, sr + kBlockN, 0.f);
      correction[r] = 1.f;
      continue;
    }
    correction[r] = row_max[r] == new_max ? 1.f : std::exp(row_max[r] - new_max);
    row_max[r] = new_max;
    const F shift = splat<F>(new_max);
    F sum = F{};
    for (int64_t c = 0; c < kBlockN; c += W) {
      const F e = exp_nonpositive<W>(load<F>(sr + c) - shift);
      store(sr + c, e);
      sum += e;
    }
    row_sum[r] = row_sum[r] * correction[r] + hsum<W>(sum);
  }
}

// 64-byte aligned float buffers of one worker, sized for the widest vector's padding. One per
// thread, grown to the widest head dim seen and then reused: a call allocates nothing (it was
// ~100 KB per task chunk per call before, a malloc/free pair on every encoder layer).
struct Workspace {
  int64_t dp = 0;
  int64_t capacity = 0;  // floats in storage
  std::unique_ptr<float[]> storage;
  float *q, *qt, *k, *v, *st, *acc, *row_max, *row_sum, *correction;

  // Lays the buffers out for head dim `dim`, growing the storage when it is too small.
  void prepare(int64_t dim) {
    const int64_t padded = round_up(std::max<int64_t>(dim, 1), kDimAlign);
    if (padded == dp) return;
    const int64_t sizes[] = {kBlockM * padded, padded * kBlockM, kBlockN * padded,
                             kBlockN * padded, kBlockN * kBlockM, kBlockM * padded,
                             kBlockM,          kBlockM,          kBlockM};
    int64_t total = 16;
    for (int64_t n : sizes) total += round_up(n, 16);
    if (total > capacity) {
      storage.reset(new float[total]);
      capacity = total;
    }
    dp = padded;
    float* at = storage.get();
    at += (16 - (reinterpret_cast<uintptr_t>(at) / sizeof(float)) % 16) % 16;
    float** slots[] = {&q, &qt, &k, &v, &st, &acc, &row_max, &row_sum, &correction};
    for (int i = 0; i < 9; ++i) {
      *slots[i] = at;
      at += round_up(sizes[i], 16);
    }
  }
};

Workspace& thread_workspace(int64_t dim) {
  thread_local Workspace workspace;
  workspace.prepare(dim);
  return workspace;
}

// Rows of float32 values: the input itself (float32, no bias, no padding needed) or a copy,
// converted, biased and zero-padded to `width` columns.
template <typename T>
DJL_FLASH_INLINE const float* load_rows(const T* src, int64_t src_stride, int64_t rows,
                                        int64_t dim, int64_t width, const T* bias,
                                        float* buffer, int64_t* stride) {
  if constexpr (std::is_same_v<T, float>) {
    if (bias == nullptr && dim == width) {
      *stride = src_stride;
      return src;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * src_stride;
    float* dst = buffer + r * width;
    if (bias != nullptr) {
      for (int64_t d = 0; d < dim; ++d) dst[d] = to_float(row[d]) + to_float(bias[d]);
    } else {
      for (int64_t d = 0; d < dim; ++d) dst[d] = to_float(row[d]);
    }
    for (int64_t d = dim; d < width; ++d) dst[d] = 0.f;
  }
  *stride = width;
  return buffer;
}

// One query tile of one (batch, head): rows [m0, m0 + rows).
template <typename T, int W>
DJL_FLASH_INLINE void attend_tile(const FlashParams& p, int64_t b, int64_t h, int64_t m0,
                                  Workspace& ws) {
  using F = typename Vec<W>::F;
  constexpr int kRows = Vec<W>::kRows;
  const int64_t dim = p.head_dim;
  const int64_t dp = round_up(dim, 2 * W);
  const SeqExtent<int64_t> seq(p, b);  // flash_params.h
  const int64_t q_row0 = seq.q_row0, k_row0 = seq.k_row0;
  const int64_t seqlen_q = seq.seqlen_q;
  if (m0 >= seqlen_q) return;  // varlen: this sequence is shorter than the longest
  const int64_t rows = std::min(kBlockM, seqlen_q - m0);
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t kv_len = seq.kv_len(p, b);
  // Query row i sees keys j <= i + diagonal (bottom-right aligned causal mask).
  const int64_t diagonal = kv_len - seqlen_q;

  // Keys this tile needs at all: from the window's left edge of its first row to the causal
  // (or window) limit of its last row.
  const KeyRange keys = visible_keys(p, diagonal, kv_len, m0, m0 + rows - 1);
  const int64_t key_begin = keys.begin, key_end = keys.end;
  const bool features = has_flash_features(p);
  const float slope = alibi_slope(p, b, h);

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + q_row0 * p.q_seq_stride +
               h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + k_row0 * p.k_seq_stride +
               h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + k_row0 * p.v_seq_stride +
               h_kv * p.v_head_stride;
  const T* q_bias = p.q_bias ? static_cast<const T*>(p.q_bias) + h * dim : nullptr;
  const T* k_bias = p.k_bias ? static_cast<const T*>(p.k_bias) + h_kv * dim : nullptr;
  const T* v_bias = p.v_bias ? static_cast<const T*>(p.v_bias) + h_kv * dim : nullptr;

  // Tiles of a few rows (decode) take dot products against key rows; the rest take the
  // register-blocked kernel over the transposed query tile, whose columns past `rows` are zero.
  const bool direct = rows < kDirectRows;
  // The scale is folded into the query once instead of into every score.
  float* q_tile = direct ? ws.q : ws.qt;
  if (!direct) std::fill(q_tile, q_tile + dim * kBlockM, 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = q + (m0 + r) * p.q_seq_stride;
    for (int64_t d = 0; d < dim; ++d) {
      const float bias = q_bias ? to_float(q_bias[d]) : 0.f;
      const float x = (to_float(row[d]) + bias) * p.scale;
      if (direct) {
        q_tile[r * dp + d] = x;
      } else {
        q_tile[d * kBlockM + r] = x;
      }
    }
    if (direct) std::fill(q_tile + r * dp + dim, q_tile + (r + 1) * dp, 0.f);
  }
  float* acc = ws.acc;
  float* row_max = ws.row_max;
  float* row_sum = ws.row_sum;
  float* correction = ws.correction;
  std::fill(acc, acc + rows * dp, 0.f);
  std::fill(row_max, row_max + kBlockM, kNegInf);
  std::fill(row_sum, row_sum + kBlockM, 0.f);
  // Queries the softmax runs over: whole vectors, the ones past `rows` see zero scores.
  const int64_t r_vec_end = round_up(rows, W);

  float* st = ws.st;
  for (int64_t n0 = key_begin; n0 < key_end; n0 += kBlockN) {
    const int64_t cols = std::min(kBlockN, key_end - n0);
    const TilePlace at{m0, n0, diagonal, kv_len, slope};
    const T* k_src = k + n0 * p.k_seq_stride;
    int64_t k_stride, v_stride;
    const float* v_rows = load_rows(v + n0 * p.v_seq_stride, p.v_seq_stride, cols, dim, dp,
                                    v_bias, ws.v, &v_stride);
    if (direct) {
      const float* k_rows =
          load_rows(k_src, p.k_seq_stride, cols, dim, dp, k_bias, ws.k, &k_stride);
      attend_direct<W>(p, at, rows, m0 + diagonal + 1 - n0, cols, q_tile, dp, k_rows, k_stride, st,
                       row_max, row_sum, correction);
      pv_block<W, kRows>(static_cast<int>(rows), st, kBlockN, 1, cols, v_rows, v_stride, acc,
                         dp, correction);
      continue;
    }

    // Scores, already scaled: st[c][r] for c < cols, r < r_vec_end.
    const float* k_rows = load_rows(k_src, p.k_seq_stride, cols, dim, dim, k_bias, ws.k, &k_stride);
    for (int64_t c0 = 0; c0 < cols; c0 += kRows) {
      const int block = static_cast<int>(std::min<int64_t>(kRows, cols - c0));
      qk_block<W, kRows>(block, k_rows + c0 * k_stride, k_stride, dim, q_tile, rows,
                         st + c0 * kBlockM);
    }

    // Keys past a row's causal limit. The tile loop already stopped at the last row's limit,
    // so only tiles crossing the diagonal have any.
    if (p.causal && m0 + diagonal + 1 - n0 < cols) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible = std::clamp<int64_t>(m0 + r + diagonal + 1 - n0, 0, cols);
        for (int64_t c = visible; c < cols; ++c) st[c * kBlockM + r] = kNegInf;
      }
    }
    if (features) {
      for (int64_t r = 0; r < rows; ++r) modify_row(p, at, r, cols, st + r, kBlockM);
    }

    // Online softmax down the columns, W queries at a time: st becomes exp(s - running max),
    // masked keys 0, and correction[r] rescales what row r accumulated under its previous
    // maximum. A row with nothing visible yet keeps max -inf and shifts by 0 instead, so that
    // its scores and correction come out exp(-inf) = 0 rather than nan.
    for (int64_t r0 = 0; r0 < r_vec_end; r0 += W) {
      F tile_max = splat<F>(kNegInf);
      for (int64_t c = 0; c < cols; ++c) {
        const F x = load<F>(st + c * kBlockM + r0);
        tile_max = x > tile_max ? x : tile_max;
      }
      const F old_max = load<F>(row_max + r0);
      const F new_max = tile_max > old_max ? tile_max : old_max;
      const F shift = new_max == splat<F>(kNegInf) ? F{} : new_max;
      const F corr = exp_nonpositive<W>(old_max - shift);
      F sum = F{};
      for (int64_t c = 0; c < cols; ++c) {
        float* at = st + c * kBlockM + r0;
        const F e = exp_nonpositive<W>(load<F>(at) - shift);
        store(at, e);
        sum += e;
      }
      store(row_max + r0, new_max);
      store(correction + r0, corr);
      store(row_sum + r0, load<F>(row_sum + r0) * corr + sum);
    }

    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const int block = static_cast<int>(std::min<int64_t>(kRows, rows - r0));
      pv_block<W, kRows>(block, st + r0, 1, kBlockM, cols, v_rows, v_stride, acc + r0 * dp, dp,
                         correction + r0);
    }
  }

  // The division by the softmax sum is deferred to here, once per row.
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + q_row0 * p.out_seq_stride +
           h * p.out_head_stride;
  float* lse = p.lse + lse_offset(p, b, h);
  for (int64_t r = 0; r < rows; ++r) {
    T* out_row = out + (m0 + r) * p.out_seq_stride;
    const float* ar = acc + r * dp;
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

template <typename T, int W>
DJL_FLASH_INLINE void attend_tasks(const FlashParams& p, int64_t begin, int64_t end,
                                   int64_t m_blocks, Workspace& ws) {
  for (int64_t t = begin; t < end; ++t) {
    const int64_t m_block = t % m_blocks;
    const int64_t bh = t / m_blocks;
    attend_tile<T, W>(p, bh / p.heads_q, bh % p.heads_q, m_block * kBlockM, ws);
  }
}

template <typename T>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void attend_tasks_avx512(
    const FlashParams& p, int64_t begin, int64_t end, int64_t m_blocks, Workspace& ws) {
  attend_tasks<T, 16>(p, begin, end, m_blocks, ws);
}

template <typename T>
__attribute__((target("avx2,fma"))) void attend_tasks_avx2(const FlashParams& p, int64_t begin,
                                                           int64_t end, int64_t m_blocks,
                                                           Workspace& ws) {
  attend_tasks<T, 8>(p, begin, end, m_blocks, ws);
}

template <typename T>
void attend_tasks_generic(const FlashParams& p, int64_t begin, int64_t end, int64_t m_blocks,
                          Workspace& ws) {
  attend_tasks<T, 4>(p, begin, end, m_blocks, ws);
}

enum class Isa { kGeneric, kAvx2, kAvx512 };

// The widest instruction set this CPU has, lowered by DJL_ATTN_CPU_ISA (generic, avx2 or
// avx512; read on every call so that tests can cover each path in one process).
// DJL_ATTN_CPU_ISA lowers the instruction set the CPU kernel uses below the best the CPU has,
// so that tests run every path on one machine.
Option kCpuIsa("DJL_ATTN_CPU_ISA", {"auto", "avx512", "avx2", "generic"},
               "lowers the CPU flash kernel's instruction set (tests)");

Isa select_isa() {
  __builtin_cpu_init();
  Isa best = Isa::kGeneric;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    best = Isa::kAvx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
      best = Isa::kAvx512;
    }
  }
  if (kCpuIsa.is("generic")) return Isa::kGeneric;
  if (kCpuIsa.is("avx2")) return std::min(best, Isa::kAvx2);
  return best;
}

template <typename T>
void run_typed(const FlashParams& p) {
  const Isa isa = select_isa();
  const int64_t m_blocks = (p.seqlen_q + kBlockM - 1) / kBlockM;
  const int64_t tasks = p.batch * p.heads_q * m_blocks;
  const int64_t work = p.batch * p.heads_q * p.seqlen_q * p.seqlen_k * p.head_dim;
  const int64_t grain = work < kInlineWork ? tasks : 1;
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    Workspace& ws = thread_workspace(p.head_dim);
    switch (isa) {
      case Isa::kAvx512: return attend_tasks_avx512<T>(p, begin, end, m_blocks, ws);
      case Isa::kAvx2: return attend_tasks_avx2<T>(p, begin, end, m_blocks, ws);
      case Isa::kGeneric: return attend_tasks_generic<T>(p, begin, end, m_blocks, ws);
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
