// Parameters of the flash attention forward pass, shared by the CPU and CUDA kernels.
// Knows nothing of PyTorch: the operator bindings (flash_attention, flash_attention_varlen and
// the fused BERT path) fill it from tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/element_type.h"

#if defined(__CUDACC__)
#define DJL_FLASH_HOST_DEVICE __host__ __device__
#else
#define DJL_FLASH_HOST_DEVICE
#endif

namespace djl_attn::flash {

using ::djl_attn::ElementType;

struct FlashParams {
  // Batched mode (cu_seqlens_q == null): shapes as written. Varlen mode: the batch strides are
  // 0 and sequence b occupies rows [cu_seqlens[b], cu_seqlens[b + 1]) of the packed tensors,
  // q [total_q, Hq, D], k/v [total_k, Hkv, D], out [total_q, Hq, D].
  const void* q;  // [B, Sq, Hq, D], last dim contiguous
  const void* k;  // [B, Sk, Hkv, D], last dim contiguous
  const void* v;  // [B, Sk, Hkv, D], last dim contiguous
  void* out;      // [B, Sq, Hq, D], last dim contiguous, dtype of q
  // Natural-log sum of exp(scaled scores) per row, float32. Element (b, h, i) is at
  // b * lse_batch_stride + h * lse_head_stride + row0(b) + i, where row0(b) is cu_seqlens_q[b]
  // in varlen mode and 0 otherwise. lse_head_stride == 0 means the contiguous [B, Hq, Sq] layout
  // (lse_batch_stride = Hq * Sq, lse_head_stride = Sq); varlen uses [Hq, total_q].
  float* lse;
  int64_t lse_batch_stride, lse_head_stride;

  // Valid keys per batch row (right padding), or null for all Sk. Batched mode only. // [B] int32
  const int32_t* kv_lens;
  // Varlen mode: cumulative sequence lengths, or null for batched mode. // [B + 1] int32 each
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;

  // Bias added to every q / k / v element as it is loaded, before scaling, or null for none:
  // the fused BERT path adds the QKV projection bias here. Same dtype as q. // [H, D] each,
  // contiguous, H = Hq for q_bias and Hkv for k_bias and v_bias
  const void* q_bias;
  const void* k_bias;
  const void* v_bias;

  // Strides in elements.
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t out_batch_stride, out_seq_stride, out_head_stride;

  int64_t batch;      // B
  // Varlen mode: the rows of the packed q (and out) and of k and v; unused in batched mode.
  int64_t total_q, total_k;
  int64_t seqlen_q;   // Sq; in varlen mode max_seqlen_q, the longest sequence
  int64_t seqlen_k;   // Sk; in varlen mode max_seqlen_k
  int64_t heads_q;    // Hq
  int64_t heads_kv;   // Hkv; Hq % Hkv == 0, query head h reads key/value head h / (Hq / Hkv)
  int64_t head_dim;   // D

  float scale;        // multiplies q·k before the softmax
  // Causal masking aligned to the bottom-right corner, as FlashAttention does: with L valid keys
  // query row i sees key j iff j <= i + (L - Sq). When Sq == L this is the usual lower triangle;
  // when Sq < L the queries are the last Sq positions of the sequence (decode with a cache).
  // In varlen mode Sq and L are the lengths of sequence b.
  bool causal;
  ElementType dtype;

  // FlashAttention-2's local attention, soft-capping and ALiBi, all off by default (the
  // defaults here are that: every FlashParams starts with them off). With o = L - Sq as for
  // `causal`, query row i sees key j only if j >= i + o - window_left (window_left >= 0) and
  // j <= i + o + window_right (window_right >= 0); -1 leaves that side unbounded. set_window
  // (below; the bindings' set_features and paged_attention's flash_decode_params) normalises them: a side that cannot cut any key is -1, window_right = 0
  // becomes `causal`, and window_right is -1 whenever `causal` is set (causal is tighter).
  int window_left = -1;
  int window_right = -1;
  // > 0: each scaled score s becomes softcap * tanh(s / softcap) (Gemma-2); 0: none.
  float softcap = 0.f;
  // ALiBi: -slope * |i + o - j| is added to the (capped) score of row i and key j; null for
  // none. Element (b, h) at b * alibi_batch_stride + h. // [Hq] or [B, Hq] float32, contiguous
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;  // 0 for [Hq], Hq for [B, Hq]
};

// The largest head dim the kernels accept.
constexpr int64_t kMaxHeadDim = 256;

// The longest Sq or Sk the kernels accept: they index rows and key tiles with 32-bit ints.
constexpr int64_t kMaxSeqLen = int64_t{1} << 30;

// The CUDA kernels run one thread block per query tile of each (batch, head), in one grid of at
// most 2^31 - 1 blocks; their smallest tiles are 64 rows (the decode kernel's blocks, one per
// (batch, head), are fewer still, and the simple kernel launches its 4-row blocks in several
// grids). The bindings refuse, on every backend, calls with more tiles than that.
constexpr int64_t kQueryTileRows = 64;
constexpr int64_t kMaxQueryTiles = 0x7fffffff;

// The head dims the tensor-core CUDA kernel is compiled for; any other D <= kMaxHeadDim runs
// padded up to the next one (the padding is zero-filled on load and never stored). This line is
// the one list: the CUDA dispatch, its instantiation files, the tests and docs/operators.md
// read it.
#define DJL_FLASH_FOR_EACH_HEAD_DIM(X) X(32) X(64) X(96) X(128) X(256)

// Whether a call uses the sliding window, soft-capping or ALiBi: the kernels' default code runs
// only without them, and the plans route calls with them (flash_plan.h).
DJL_FLASH_HOST_DEVICE inline bool has_window(const FlashParams& p) {
  return p.window_left >= 0 || p.window_right >= 0;
}
DJL_FLASH_HOST_DEVICE inline bool has_score_mods(const FlashParams& p) {
  return p.softcap > 0.f || p.alibi_slopes != nullptr;
}
DJL_FLASH_HOST_DEVICE inline bool has_flash_features(const FlashParams& p) {
  return has_window(p) || has_score_mods(p);
}

// Sets p's window from the schema's window_left / window_right (-1: unbounded side) in the form
// every kernel reads, after seqlen_q, seqlen_k and causal are set: a side that cuts no key of
// any row is dropped (rows see j >= i + o - window_left with i + o <= L - 1 <= Sk - 1, and
// j <= i + o + window_right with i + o >= L - Sq), so windows wider than the sequences run the
// default code; window_right = 0 is the causal mask, which the kernels already skip tiles for;
// and causal makes any window_right >= 0 redundant. The one place this is decided: the bindings
// (set_features in flash_op.cpp), paged_attention's decode on the flash kernel
// (flash_decode_params, cuda/paged/paged_plan.h) and the plan tests' stand-in calls call it.
inline void set_window(FlashParams& p, int64_t window_left, int64_t window_right) {
  p.window_left = window_left >= p.seqlen_k - 1 ? -1 : static_cast<int>(window_left);
  p.window_right = window_right >= p.seqlen_q - 1 ? -1 : static_cast<int>(window_right);
  if (p.window_right == 0) p.causal = true;
  if (p.causal) p.window_right = -1;
}

// Where sequence b of a call lies, FlashAttention's BlockInfo: its first rows in the packed q
// and k (varlen; 0 in batched mode), its query rows, and (kv_len, read only where a kernel asks,
// after its early exits) its valid keys. The one statement of the per-sequence prologue for every
// kernel, CPU and GPU. I: the kernel's index type (int on the GPU, whose lengths the bindings
// bound by 2^30). kVarlen false: batched calls only (the decode and Hopper kernels, whose plans
// never give them a varlen call), so that no varlen branch is compiled into them.
template <typename I, bool kVarlen = true>
struct SeqExtent {
  int64_t q_row0, k_row0;
  I seqlen_q;
  bool varlen;  // kVarlen and the call is varlen

  DJL_FLASH_HOST_DEVICE SeqExtent(const FlashParams& p, int64_t b) {
    varlen = kVarlen && p.cu_seqlens_q != nullptr;
    q_row0 = varlen ? p.cu_seqlens_q[b] : 0;
    k_row0 = varlen ? p.cu_seqlens_k[b] : 0;
    seqlen_q = varlen ? p.cu_seqlens_q[b + 1] - static_cast<I>(q_row0) : static_cast<I>(p.seqlen_q);
  }

  // Valid keys L of sequence b: its cu_seqlens_k range (varlen), kv_lens[b], or Sk; clamped to
  // [0, Sk]: the bindings checked the lengths, the clamp keeps a bad value from reading out of
  // bounds.
  DJL_FLASH_HOST_DEVICE I kv_len(const FlashParams& p, int64_t b) const {
    I len;
    if constexpr (kVarlen) {
      len = static_cast<I>(p.seqlen_k);
      if (varlen) {
        len = p.cu_seqlens_k[b + 1] - static_cast<I>(k_row0);
      } else if (p.kv_lens != nullptr) {
        len = p.kv_lens[b];
      }
    } else {
      len = p.kv_lens != nullptr ? p.kv_lens[b] : static_cast<I>(p.seqlen_k);
    }
    return clamp_length(len, static_cast<I>(p.seqlen_k));
  }

 private:
  // min(max(len, 0), seqlen_k), as every kernel wrote it (the spelling and order of the loads
  // are the kernels' own: ptxas schedules the rest of a kernel around them).
  DJL_FLASH_HOST_DEVICE static I clamp_length(I len, I seqlen_k) {
#if defined(__CUDA_ARCH__)
    return min(max(len, I{0}), seqlen_k);
#else
    return std::min(std::max(len, I{0}), seqlen_k);
#endif
  }
};

// The keys query row i sees, as the closed range [lo, hi] of key indices (lo > hi: none), given
// its position pos = i + o (o = L - Sq, the bottom-right diagonal) and `kv_len` = L valid keys:
// the valid keys, the causal limit and the sliding window. In the index type of the caller (int
// on the GPU: the binding bounds every position and window by 2^30, flash_params normalises the
// window below Sk and Sq).
template <typename I>
struct RowKeys {
  I lo, hi;
};
template <typename I>
DJL_FLASH_HOST_DEVICE inline RowKeys<I> row_keys(const FlashParams& p, I pos, I kv_len) {
  RowKeys<I> r{p.window_left >= 0 ? pos - static_cast<I>(p.window_left) : I{0}, kv_len - 1};
  if (r.lo < 0) r.lo = 0;
  if (p.causal && pos < r.hi) r.hi = pos;
  if (p.window_right >= 0 && pos + static_cast<I>(p.window_right) < r.hi) {
    r.hi = pos + static_cast<I>(p.window_right);
  }
  return r;
}

// The keys [begin, end) that query rows [row_first, row_last] of one sequence may see, with
// `diagonal` = o and `kv_len` = L: the union of the rows' ranges, which move right with the row.
// Every kernel cuts its key loop to this range, so that key tiles wholly outside the window or
// past the causal diagonal are never loaded. end <= begin: no key at all.
struct KeyRange {
  int64_t begin, end;
};
DJL_FLASH_HOST_DEVICE inline KeyRange visible_keys(const FlashParams& p, int64_t diagonal,
                                                   int64_t kv_len, int64_t row_first,
                                                   int64_t row_last) {
  const int64_t begin = row_keys<int64_t>(p, row_first + diagonal, kv_len).lo;
  const int64_t end = row_keys<int64_t>(p, row_last + diagonal, kv_len).hi + 1;
  return KeyRange{begin, end > begin ? end : begin};
}

// Whether query row i sees a valid key j, from d = i + o - j alone: the causal and window
// rules. The GPU kernels test every score of a feature call with it, reading the rules from the
// parameters where they lie rather than holding bounds in registers.
DJL_FLASH_HOST_DEVICE inline bool offset_visible(const FlashParams& p, int d) {
  return (!p.causal || d >= 0) && (p.window_left < 0 || d <= p.window_left) &&
         (p.window_right < 0 || d >= -p.window_right);
}

// Soft-capping and ALiBi of one visible score `s` (scaled, natural-log domain) of row position
// i + o and key j, `distance` = |i + o - j|, `slope` the head's ALiBi slope (0 without ALiBi).
DJL_FLASH_HOST_DEVICE inline float modify_score(float s, float softcap, float slope,
                                                float distance) {
  if (softcap > 0.f) {
#if defined(__CUDA_ARCH__)
    // tanh(x) = 1 - 2 / (1 + e^(2x)), in four instructions where tanhf inlines a few dozen
    // per score into every tile kernel. Its error is a few ulps of 1, absolute, so the capped
    // score is off by a few ulps of softcap: the softmax sees that as a relative error of
    // ~1e-7 * softcap in a probability (1e-6 at softcap 30, below float32 attention's own).
    // e^(2x) overflowing to inf gives 1, underflowing to 0 gives -1.
    const float e = exp2f(s / softcap * 2.8853900817779268f);  // 2 * log2(e)
    s = softcap * (1.f - __fdividef(2.f, 1.f + e));
#else
    s = softcap * std::tanh(s / softcap);
#endif
  }
  return s - slope * distance;
}

// The ALiBi slope of batch row b and query head h, 0 without ALiBi.
DJL_FLASH_HOST_DEVICE inline float alibi_slope(const FlashParams& p, int64_t b, int64_t h) {
  return p.alibi_slopes != nullptr ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.f;
}

// Where lse element (b, h, 0) lives, resolving the default layout.
DJL_FLASH_HOST_DEVICE inline int64_t lse_offset(const FlashParams& p, int64_t b, int64_t h) {
  if (p.lse_head_stride == 0) return (b * p.heads_q + h) * p.seqlen_q;
  return b * p.lse_batch_stride + h * p.lse_head_stride +
         (p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[b] : 0);
}

}  // namespace djl_attn::flash
