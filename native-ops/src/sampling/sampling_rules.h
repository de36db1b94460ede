// The rulebook of sample_tokens shared by the CPU and the CUDA kernel, so that both draw the same
// id for the same row: the counter-based random number (Philox4x32-10), the order of logits as
// integer keys, the fixed-point weights and the nucleus boundary. Host and device code; no
// PyTorch, no Java. docs/operators.md ("sample_tokens") states the rules in words.
//
// Why fixed point: a sum of 64-bit integers is the same in any order, so the CUDA kernel may add
// weights with atomics and still return the same id on every run, and CPU and CUDA agree exactly
// wherever their weights agree. The weights themselves agree bit for bit too: `fixed_weight`
// computes exp with correctly rounded float32 additions, multiplications and one division in a
// fixed order (no fused multiply-add, no library exp, whose last bit differs between glibc and
// CUDA).
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>

#if defined(__CUDACC__)
#define DJL_SAMPLING_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DJL_SAMPLING_HOST_DEVICE inline
#endif

namespace djl_attn::sampling {

// A weight is floor(w * 2^40) for w = exp((logit - max) / temperature) in [0, 1]: the most likely
// token weighs exactly 2^40. Tokens with w < 2^-40 (a logit more than ln(2^40) = 27.7
// temperatures below the maximum) weigh 0 and are never drawn; the mass so dropped is below
// V * 2^-40 of the total (1.2e-7 at V = 128,256). A row's total stays below 2^64 for V <= 2^24.
constexpr int kWeightBits = 40;
constexpr uint64_t kWeightOne = uint64_t{1} << kWeightBits;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
// exp(z) < 2^-40 for every z below this (e^-28 = 6.9e-13 < 2^-40 = 9.1e-13): such weights are 0
// without evaluating the polynomial, and the shortcut changes no weight.
constexpr float kWeightCutoff = -28.0f;

DJL_SAMPLING_HOST_DEVICE uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

DJL_SAMPLING_HOST_DEVICE float bits_float(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Correctly rounded float32 arithmetic that no compiler contracts into a fused multiply-add: the
// device intrinsics are never contracted; the host file is compiled with -ffp-contract=off.
DJL_SAMPLING_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DJL_SAMPLING_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DJL_SAMPLING_HOST_DEVICE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// ---- the random number ------------------------------------------------------------------------

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
// generator of cuRAND and PyTorch's CUDA generator): four 32-bit outputs from a 128-bit counter
// and a 64-bit key. Test vectors: Random123's kat_vectors (tests/test_sample_tokens.py).
struct Philox4x32 {
  uint32_t v[4];
};

DJL_SAMPLING_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * ctr.v[0];
    const uint64_t p1 = uint64_t{kM1} * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// The row's uniform number as 64 random bits, u = bits / 2^64 in [0, 1): Philox keyed by the
// seed, counting by the offset. Nothing else enters, so a row draws the same number whatever
// batch it is in, and again on every run.
DJL_SAMPLING_HOST_DEVICE uint64_t uniform_bits(int64_t seed, int64_t offset) {
  const uint64_t s = static_cast<uint64_t>(seed), o = static_cast<uint64_t>(offset);
  const Philox4x32 out = philox4x32_10(
      {{static_cast<uint32_t>(o), static_cast<uint32_t>(o >> 32), 0u, 0u}},
      static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
  return uint64_t{out.v[0]} | (uint64_t{out.v[1]} << 32);
}

// floor(u * total) for u = bits / 2^64: the position in [0, total) that the draw lands on.
DJL_SAMPLING_HOST_DEVICE uint64_t draw_target(uint64_t bits, uint64_t total) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * total) >> 64);
}

// ---- a row's rules ----------------------------------------------------------------------------

// Temperature 0 is greedy. (Negative and NaN temperatures are refused by the binding; a captured
// CUDA call cannot read them back, and its kernel then treats them as greedy too.)
DJL_SAMPLING_HOST_DEVICE bool is_greedy(float temperature) { return !(temperature > 0.0f); }

// top_k 0 keeps every token, as does any k >= V (and, unchecked, k < 0).
DJL_SAMPLING_HOST_DEVICE int64_t effective_top_k(int32_t top_k, int64_t vocab) {
  return top_k <= 0 || top_k >= vocab ? vocab : top_k;
}

// top_p 1 keeps every token after top-k (and, unchecked, p > 1 or NaN).
DJL_SAMPLING_HOST_DEVICE bool applies_top_p(float top_p) { return top_p < 1.0f; }

// A logit as an unsigned key in the float order: larger logit, larger key. -0 and +0 are one key
// (they compare equal); NaN is the smallest key (below -inf): sampling never keeps it for its own
// sake, and its weight is 0.
DJL_SAMPLING_HOST_DEVICE uint32_t order_key(float x) {
  if (x != x) return 0u;
  uint32_t b = float_bits(x);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The fixed-point weight of a logit (kWeightBits above): `max` is the row's largest non-NaN
// logit, `temperature` > 0. Every token equal to the max weighs kWeightOne (also when the max is
// +inf: each +inf logit then weighs one and the rest nothing); a NaN logit weighs 0.
//
// exp(z) for z = (x - max) / T in [-28, 0]: z = k ln2 + r with k = rint(z / ln2) and
// |r| <= ln2 / 2 (Cody-Waite, ln2 in two parts), e^r by its Taylor polynomial of degree 7
// (truncation error below 5e-9 relative), times 2^k. Within about 3e-7 of exp; what matters
// more, every operation is a correctly rounded float32 one in a fixed order, so the CPU and the
// GPU get the same bits.
DJL_SAMPLING_HOST_DEVICE uint64_t fixed_weight(float x, float max, float temperature) {
  if (x != x) return 0;
  if (x == max) return kWeightOne;
  const float z = div_rn(add_rn(x, -max), temperature);
  if (!(z >= kWeightCutoff)) return 0;
  constexpr float kLog2E = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;     // 12 significant bits: k * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  const float k = rintf(mul_rn(z, kLog2E));
  float r = add_rn(z, -mul_rn(k, kLn2Hi));
  r = add_rn(r, -mul_rn(k, kLn2Lo));
  float e = 1.0f / 5040.0f;
  e = add_rn(mul_rn(e, r), 1.0f / 720.0f);
  e = add_rn(mul_rn(e, r), 1.0f / 120.0f);
  e = add_rn(mul_rn(e, r), 1.0f / 24.0f);
  e = add_rn(mul_rn(e, r), 1.0f / 6.0f);
  e = add_rn(mul_rn(e, r), 0.5f);
  e = add_rn(mul_rn(e, r), 1.0f);
  e = add_rn(mul_rn(e, r), 1.0f);
  // k in [-41, 0]: 2^k is a normal float, and both products below are exact.
  const float two_k = bits_float(static_cast<uint32_t>(127 + static_cast<int>(k)) << 23);
  const float w = mul_rn(e, two_k);
  return static_cast<uint64_t>(mul_rn(w, static_cast<float>(kWeightOne)));
}

// The nucleus's mass: ceil(p * total), computed exactly (p's float32 value times the integer
// total). The kept tokens are those with the largest logits (order_key), equal logits by the
// lower id, up to and including the first whose running sum of weights reaches it. Ordering by
// the logit rather than by the weight makes the boundary a radix select over keys on the GPU,
// and needs nothing of the weights' rounding (equal logits have equal weights; a larger logit
// has a weight at least as large up to the last bit of the polynomial). p <= 0 (unchecked) keeps
// one token: the lowest id among the largest logits.
DJL_SAMPLING_HOST_DEVICE uint64_t nucleus_need(float top_p, uint64_t total) {
  if (!applies_top_p(top_p)) return total;
  if (!(top_p > 0.0f) || total == 0) return total == 0 ? 0 : 1;
  const uint32_t b = float_bits(top_p);
  const uint32_t exponent = (b >> 23) & 0xFFu;
  uint64_t mantissa = b & 0x7FFFFFu;
  int shift = 149;  // subnormal: p = mantissa * 2^-149
  if (exponent != 0) {
    mantissa |= 0x800000u;
    shift = 150 - static_cast<int>(exponent);  // p = mantissa * 2^(exponent - 150)
  }
  const unsigned __int128 product = static_cast<unsigned __int128>(mantissa) * total;
  if (shift >= 100) return 1;  // product < 2^88: a positive product / 2^shift rounds up to 1
  const unsigned __int128 one = static_cast<unsigned __int128>(1) << shift;
  return static_cast<uint64_t>((product + one - 1) >> shift);
}

}  // namespace djl_attn::sampling
