// Compiled with -ffp-contract=off (CMakeLists.txt): sampling_rules.h's weights must be the
// correctly rounded float32 operations the CUDA kernel performs, never fused.
#include "sampling/sample_tokens_cpu.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "common/half.h"
#include "common/thread_pool.h"
#include "sampling/sampling_rules.h"

namespace djl_attn::sampling {
namespace {

// torch.argmax's order: the first maximum, a NaN above every number (the first NaN wins).
bool beats(float v, float best) { return (v != v && best == best) || v > best; }

// The nucleus's buckets: a key's top 11 bits.
constexpr int kBucketShift = 21;
constexpr uint32_t kBuckets = 1u << (32 - kBucketShift);

// Scratch of one thread, grown to the largest row seen.
struct RowScratch {
  std::vector<float> logits;          // [V]
  std::vector<uint32_t> keys;         // [V]: order keys, for the top-k threshold and the nucleus
  std::vector<uint64_t> weights;      // [V]
  std::vector<uint64_t> bucket_mass;  // [kBuckets]
  std::vector<int32_t> order;         // the nucleus's boundary bucket, largest logit first
};

template <typename T>
void load_row(const T* src, int64_t vocab, float* dst) {
  for (int64_t i = 0; i < vocab; ++i) dst[i] = to_float(src[i]);
}

int64_t sample_row(const SampleTokensParams& p, int64_t b, RowScratch& s) {
  const int64_t vocab = p.vocab;
  s.logits.resize(vocab);
  float* x = s.logits.data();
  switch (p.dtype) {
    case ElementType::kFloat32:
      load_row(static_cast<const float*>(p.logits) + b * vocab, vocab, x);
      break;
    case ElementType::kFloat16:
      load_row(static_cast<const Half*>(p.logits) + b * vocab, vocab, x);
      break;
    case ElementType::kBFloat16:
      load_row(static_cast<const BFloat16*>(p.logits) + b * vocab, vocab, x);
      break;
  }
  int64_t argmax = 0;
  float max = -INFINITY;  // the largest non-NaN logit
  bool any_number = false;
  for (int64_t i = 0; i < vocab; ++i) {
    if (beats(x[i], x[argmax])) argmax = i;
    if (x[i] == x[i]) {
      max = std::max(max, x[i]);
      any_number = true;
    }
  }
  const float temperature = p.temperature[b];
  if (is_greedy(temperature) || !any_number) return argmax;

  // Top-k: keep keys >= the k-th largest (ties at the threshold kept).
  const int64_t k = effective_top_k(p.top_k[b], vocab);
  uint32_t threshold = 0;
  if (k < vocab) {
    s.keys.resize(vocab);
    for (int64_t i = 0; i < vocab; ++i) s.keys[i] = order_key(x[i]);
    std::nth_element(s.keys.begin(), s.keys.begin() + (k - 1), s.keys.end(),
                     std::greater<uint32_t>());
    threshold = s.keys[k - 1];
  }
  s.weights.resize(vocab);
  uint64_t* w = s.weights.data();
  uint64_t total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    w[i] = order_key(x[i]) >= threshold ? fixed_weight(x[i], max, temperature) : 0;
    total += w[i];
  }

  // Top-p: the largest logits, ties by the lower id, until their mass reaches ceil(p total).
  // The tokens are bucketed by their key's top 11 bits (a factor of 2^(1/4) in |logit|): the
  // buckets above the one where the running mass from the top reaches the need are kept whole,
  // those below dropped, and only that bucket's tokens are sorted.
  const uint64_t need = nucleus_need(p.top_p[b], total);
  if (need < total) {
    s.keys.resize(vocab);
    s.bucket_mass.assign(kBuckets, 0);
    for (int64_t i = 0; i < vocab; ++i) {
      s.keys[i] = order_key(x[i]);
      s.bucket_mass[s.keys[i] >> kBucketShift] += w[i];
    }
    uint32_t bucket = kBuckets - 1;
    uint64_t kept = 0;
    while (kept + s.bucket_mass[bucket] < need) kept += s.bucket_mass[bucket--];
    const uint32_t* key = s.keys.data();
    s.order.clear();
    for (int64_t i = 0; i < vocab; ++i) {
      const uint32_t in = key[i] >> kBucketShift;
      if (in < bucket) w[i] = 0;
      if (in == bucket && w[i] > 0) s.order.push_back(static_cast<int32_t>(i));
    }
    std::sort(s.order.begin(), s.order.end(), [key](int32_t a, int32_t c) {
      return key[a] != key[c] ? key[a] > key[c] : a < c;
    });
    size_t n = 0;
    while (n < s.order.size() && kept < need) kept += w[s.order[n++]];
    for (size_t j = n; j < s.order.size(); ++j) w[s.order[j]] = 0;
    total = kept;
  }

  // The draw: the first token, in id order, whose running mass passes u * total.
  const uint64_t target = draw_target(uniform_bits(p.seeds[b], p.offsets[b]), total);
  uint64_t running = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    running += w[i];
    if (running > target) return i;
  }
  return argmax;  // not reached: target < total
}

}  // namespace

void run_sample_tokens_cpu(const SampleTokensParams& params) {
  // About 64k logits per task: a small batch of a small vocabulary stays on the calling thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / params.vocab);
  parallel_for(params.batch, grain, [&params](int64_t begin, int64_t end) {
    thread_local RowScratch scratch;
    for (int64_t b = begin; b < end; ++b) params.ids[b] = sample_row(params, b, scratch);
  });
}

}  // namespace djl_attn::sampling
