// float16 and bfloat16 storage types for CPU kernels: conversion to and from float32 with
// round-to-nearest-even, the rounding PyTorch uses, so results match torch bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace djl_attn {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

inline float to_float(float x) { return x; }

inline float to_float(BFloat16 x) { return bits_to_float(uint32_t{x.bits} << 16); }

inline float to_float(Half x) {
  uint32_t sign = uint32_t{x.bits & 0x8000u} << 16;
  uint32_t exponent = (x.bits >> 10) & 0x1fu;
  uint32_t mantissa = x.bits & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));  // inf/nan
  if (exponent == 0) {
    if (mantissa == 0) return bits_to_float(sign);
    // Subnormal: value = mantissa * 2^-24, exact in float32.
    float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -value : value;
  }
  return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

template <typename T>
T from_float(float x);

template <>
inline float from_float<float>(float x) {
  return x;
}

template <>
inline BFloat16 from_float<BFloat16>(float x) {
  uint32_t bits = float_to_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((bits >> 16) | 0x40u)};  // nan
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{uint16_t(bits >> 16)};
}

template <>
inline Half from_float<Half>(float x) {
  uint32_t bits = float_to_bits(x);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u)};  // nan
  if (abs >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // rounds to inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: round abs * 2^24 to an integer, ties to even. The float
    // addition of 0.5 (2^-1 at exponent 126) does exactly that for values below 2^-14.
    float shifted = bits_to_float(abs) + 0.5f;
    return Half{uint16_t(sign | (float_to_bits(shifted) - 0x3f000000u))};
  }
  uint32_t mantissa_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mantissa_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return Half{uint16_t(sign | (abs >> 13))};
}

}  // namespace djl_attn
