// The row normalisation of the CPU decoder kernels (decoder_layer, decoder_head), in one place:
// statistics in double, the row in float32, stores rounded to the stream's dtype.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/half.h"
#include "decoder/decoder_layer_params.h"

namespace djl_attn::decoder {

// RMSNorm or LayerNorm of one row in float32: y = normalise(x) * weight (+ bias).
template <typename T>
void norm_row(const T* x, T* y, const NormWeights& w, int64_t c, NormType type, float eps) {
  float mean = 0.f;
  if (type == NormType::kLayer) {
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += to_float(x[j]);
    mean = static_cast<float>(sum / c);
  }
  double squares = 0;
  for (int64_t j = 0; j < c; ++j) {
    const float d = to_float(x[j]) - mean;
    squares += static_cast<double>(d) * d;
  }
  const float inv = 1.f / std::sqrt(static_cast<float>(squares / c) + eps);
  for (int64_t j = 0; j < c; ++j) {
    float v = (to_float(x[j]) - mean) * inv * w.weight[j];
    if (w.bias != nullptr) v += w.bias[j];
    y[j] = from_float<T>(v);
  }
}

}  // namespace djl_attn::decoder
