// The FP8 formats on the host: OCP e4m3fn (the format of torch.float8_e4m3fn, of vLLM's fp8 /
// fp8_e4m3 caches and of flash_attention_fp8's q, k and v) and OCP e5m2 (torch.float8_e5m2,
// vLLM's fp8_e5m2 caches).
//   e4m3fn: one sign bit, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 holds the
//           subnormals m/8 * 2^-6; the one NaN pattern per sign is S.1111.111; there are no
//           infinities, and the largest finite value is 1.75 * 2^8 = 448.
//   e5m2:   one sign bit, 5 exponent bits (bias 15), 2 mantissa bits (the upper byte of an IEEE
//           half); exponent 0 holds the subnormals m/4 * 2^-14; exponent 31 holds the infinities
//           (mantissa 0) and NaNs; the largest finite value is 1.75 * 2^15 = 57344.
// Both are written sat(round_to_nearest_even(x)): beyond the largest finite value (infinities
// included) the largest finite value of that sign, as vLLM's __NV_SATFINITE conversions and
// torch's cast after a clamp give; NaN stays NaN.
//
// The CPU kernels (the paged family's fp8 caches, flash_attention_fp8) convert with these
// functions; they are written to be checked by eye rather than to be fast (a cache row is
// converted once per block for all the query rows that read it; flash_attention_fp8 converts
// each input element once). The CUDA kernels use cuda_fp8.h, and the tests hold both against
// torch's own casts.
#pragma once

#include <cmath>
#include <cstdint>

namespace djl_attn {

constexpr float kFp8Max = 448.f;
constexpr uint8_t kFp8NaN = 0x7f;

// The value of an e4m3fn byte.
inline float fp8_e4m3_to_float(uint8_t byte) {
  const bool negative = (byte & 0x80) != 0;
  const int exponent = (byte >> 3) & 0xf;
  const int mantissa = byte & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa) / 8.f, -6)
                              : std::ldexp(1.f + static_cast<float>(mantissa) / 8.f, exponent - 7);
  return negative ? -magnitude : magnitude;
}

// sat(round_to_nearest_even(x)): the nearest e4m3fn value, ties to the even mantissa; beyond
// +-448 (infinities included) the largest finite value of that sign; NaN stays NaN.
inline uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return kFp8NaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float magnitude = std::fabs(x);
  if (magnitude >= kFp8Max) return sign | 0x7e;  // 448 = 1.110 * 2^8
  // The spacing of e4m3 values around `magnitude`: 2^(e - 3) in the binade [2^e, 2^(e+1)),
  // and 2^-9 (the subnormal step) below 2^-6. Dividing by a power of two is exact, so the one
  // rounding is nearbyint's, which rounds half to even in the default rounding mode.
  int e = 0;
  std::frexp(magnitude, &e);  // magnitude = f * 2^e with f in [0.5, 1): binade 2^(e-1)
  const int binade = magnitude == 0.f ? -6 : (e - 1 < -6 ? -6 : e - 1);
  const float step = std::ldexp(1.f, binade - 3);
  const float rounded = std::nearbyint(magnitude / step) * step;  // may carry into 2^(binade+1)
  if (rounded >= kFp8Max) return sign | 0x7e;  // 448 itself, or past it: saturate
  if (rounded < std::ldexp(1.f, -6)) {
    // Subnormal (or zero): rounded = m * 2^-9, m in [0, 7].
    return sign | static_cast<uint8_t>(rounded / std::ldexp(1.f, -9));
  }
  int exponent = 0;
  const float fraction = std::frexp(rounded, &exponent);  // rounded = fraction * 2^exponent
  // rounded = (1 + m/8) * 2^(exponent - 1): field exponent - 1 + 7, mantissa m.
  const int mantissa = static_cast<int>(fraction * 16.f) - 8;
  return sign | static_cast<uint8_t>(((exponent + 6) << 3) | mantissa);
}

constexpr float kFp8E5M2Max = 57344.f;
constexpr uint8_t kFp8E5M2NaN = 0x7f;  // torch's NaN byte for float8_e5m2

// The value of an e5m2 byte.
inline float fp8_e5m2_to_float(uint8_t byte) {
  const bool negative = (byte & 0x80) != 0;
  const int exponent = (byte >> 2) & 0x1f;
  const int mantissa = byte & 0x3;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa == 0 ? INFINITY : std::nanf("");
  } else {
    magnitude = exponent == 0
                    ? std::ldexp(static_cast<float>(mantissa) / 4.f, -14)
                    : std::ldexp(1.f + static_cast<float>(mantissa) / 4.f, exponent - 15);
  }
  return negative ? -magnitude : magnitude;
}

// sat(round_to_nearest_even(x)) in e5m2, as float_to_fp8_e4m3 does it in e4m3: beyond +-57344
// (infinities included) +-57344, NaN stays NaN. Rounding straight from float32 (not through a
// half, whose own rounding would make a second one).
inline uint8_t float_to_fp8_e5m2(float x) {
  if (std::isnan(x)) return kFp8E5M2NaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float magnitude = std::fabs(x);
  if (magnitude >= kFp8E5M2Max) return sign | 0x7b;  // 57344 = 1.11 * 2^15
  // The spacing around `magnitude`: 2^(e - 2) in the binade [2^e, 2^(e+1)), 2^-16 (the
  // subnormal step) below 2^-14.
  int e = 0;
  std::frexp(magnitude, &e);
  const int binade = magnitude == 0.f ? -14 : (e - 1 < -14 ? -14 : e - 1);
  const float step = std::ldexp(1.f, binade - 2);
  const float rounded = std::nearbyint(magnitude / step) * step;
  if (rounded >= kFp8E5M2Max) return sign | 0x7b;
  if (rounded < std::ldexp(1.f, -14)) {
    // Subnormal (or zero): rounded = m * 2^-16, m in [0, 3].
    return sign | static_cast<uint8_t>(rounded / std::ldexp(1.f, -16));
  }
  int exponent = 0;
  const float fraction = std::frexp(rounded, &exponent);  // rounded = fraction * 2^exponent
  // rounded = (1 + m/4) * 2^(exponent - 1): field exponent - 1 + 15, mantissa m.
  const int mantissa = static_cast<int>(fraction * 8.f) - 4;
  return sign | static_cast<uint8_t>(((exponent + 14) << 2) | mantissa);
}

}  // namespace djl_attn
