// The CPU GEMM layer: the one place the fused layers (decoder_layer today, the encoder layer of
// issue 24 next) multiply activations by weights. Knows nothing of the operators that call it.
//
// Backends, chosen per dtype (measurements and the decision: docs/design/gemm-layer.md):
//   mkl-sgemm  float32: MKL's sgemm_ from the libtorch_cpu.so the process already loaded (DJL's
//              libtorch and Python's torch both carry MKL): 71-73% of a core's FMA peak on the
//              MiniLM and BERT-base shapes here, nothing to download or link.
//   torch-mm   everything else (float16, bfloat16 - oneDNN/AMX inside libtorch), and float32
//              when libtorch exports no sgemm_: libtorch's own mm through the stable C shim.
// DJL_ATTN_CPU_GEMM=torch forces torch-mm for every dtype (tests run both).
#pragma once

#include <cstdint>

#include "common/element_type.h"

namespace djl_attn::gemm {

// c = a · wᵀ: a weight stored [out, in] (PyTorch's Linear, Hugging Face checkpoints) applied to
// rows of activations. Strides in elements.
struct GemmNT {
  const void* a;     // [m, k], row stride lda
  int64_t lda;
  const void* w;     // [n, k], contiguous
  void* c;           // [m, n], contiguous (overwritten)
  int64_t m, n, k;
  ElementType dtype;  // of a, w and c
};

// Runs one product on the calling thread (the backend uses libtorch's intra-op threads).
// Throws NativeError when the backend fails.
void gemm_nt(const GemmNT& g);

// The backend gemm_nt uses now for `dtype`: "mkl-sgemm" or "torch-mm".
const char* gemm_backend(ElementType dtype);

}  // namespace djl_attn::gemm
