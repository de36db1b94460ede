// The activations shared by CUDA kernel families (the decoder's MLP, its GEMM epilogues, BERT's
// elementwise pass), in float32: one definition, so that a fused epilogue computes exactly what
// the unfused kernel it replaces computed.
#pragma once

#include <cuda_runtime.h>

namespace djl_attn::cuda {

// GELU, tanh approximation (Hugging Face's gelu_new / gelu_pytorch_tanh).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// SiLU (swish), as LLaMA's SwiGLU gate uses it.
__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }

}  // namespace djl_attn::cuda
