// Parameters of the fused BERT operators (bias + residual + norm, bias + activation, bias +
// residual + per-channel affine, padding removal and restoration), shared by the CPU and CUDA
// kernels. Knows nothing of PyTorch: the operator bindings fill these from tensors.
//
// Every activation tensor is a contiguous stack of `rows` rows of `channels` elements; the
// per-channel vectors (bias, gamma, beta, scale, shift) have `channels` elements.
#pragma once

#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::bert {

using ::djl_attn::ElementType;

// y = LayerNorm(x + bias + residual) * gamma + beta over the last dim, two-pass statistics (double
// sums on the CPU, float32 partial sums and a tree reduction on CUDA: docs/operators.md).
struct LayerNormParams {
  const void* x;         // [rows, C], dtype `dtype`
  const void* bias;      // [C] dtype `param_dtype`, or null
  const void* residual;  // [rows, C], dtype `dtype`
  const void* gamma;     // [C], dtype `param_dtype`
  const void* beta;      // [C], dtype `param_dtype`
  void* out;             // [rows, C], dtype `dtype`; may not alias the inputs

  int64_t rows;
  int64_t channels;  // C >= 1
  float eps;         // added to the variance, >= 0
  ElementType dtype;        // of x, residual and out
  ElementType param_dtype;  // of bias, gamma, beta: `dtype` or float32
};

// What an elementwise pass does after adding the bias.
enum class Epilogue {
  kGeluErf,   // y = gelu(x + bias), 0.5 v (1 + erf(v / sqrt 2))
  kGeluTanh,  // y = gelu(x + bias), 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3)))
  kAffine,    // y = (x + bias + residual) * scale + shift
};

// One read and one write of the activations, channel index = position in the last dim.
struct ElementwiseParams {
  const void* x;         // [rows, C], dtype `dtype`
  const void* bias;      // [C] dtype `param_dtype`, or null
  const void* residual;  // [rows, C] dtype `dtype`; kAffine only, otherwise null
  const void* scale;     // [C] dtype `param_dtype`; kAffine only
  const void* shift;     // [C] dtype `param_dtype`; kAffine only
  void* out;             // [rows, C], dtype `dtype`; may equal x (each element is read before
                         // it is written, by the same thread), never overlap it otherwise

  int64_t rows;
  int64_t channels;  // C >= 1
  Epilogue epilogue;
  ElementType dtype;
  ElementType param_dtype;  // `dtype` or float32
};

// Right-padded batch <-> packed tokens. Batch row b holds lens[b] = cu_seqlens[b + 1] -
// cu_seqlens[b] valid tokens at positions [0, lens[b]) of its `seqlen` positions; packed token
// cu_seqlens[b] + s is padded position (b, s).
struct PaddingParams {
  void* padded;                // [B, S, C]: read by remove, written by restore (zeros past lens)
  void* packed;                // [total, C]: written by remove, read by restore
  const int32_t* cu_seqlens;   // [B + 1] int32, on the data's device; cu_seqlens[0] = 0

  // Strides of `padded` in elements (the binding passes contiguous tensors: S * C and C).
  int64_t padded_batch_stride, padded_seq_stride;

  int64_t batch;     // B
  int64_t seqlen;    // S
  int64_t channels;  // C
  int64_t total;     // cu_seqlens[B]
  int64_t element_size;  // bytes per element: the copy does not look at the values
};

}  // namespace djl_attn::bert
