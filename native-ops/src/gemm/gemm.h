// The CPU GEMM layer: the one place the fused layers (decoder_layer, encoder_layer) multiply
// activations by weights. Knows nothing of the operators that call it.
//
// Backends (measurements and the decision: docs/design/gemm-layer.md):
//   mkl-sgemm   float32 [n, k] weights: MKL's sgemm_ from the libtorch_cpu.so the process already
//               loaded (DJL's libtorch and Python's torch both carry MKL), nothing to link.
//   mkl-packed  float32 weights packed once (pack_weight): MKL's cblas_sgemm_pack layout and
//               cblas_sgemm_compute, 1.5-3x sgemm_ at M = 16 (one short sentence), equal at large M.
//   torch-mm    everything else (float16, bfloat16: oneDNN with AMX inside libtorch), and float32
//               when libtorch exports no sgemm_: libtorch's own mm through the stable C shim.
//   torch-int8  the int8 mode: weights quantized once per output channel, activations per row
//               on every call, libtorch's _int_mm (oneDNN s8s8s32: AMX / VNNI) in between.
//               libtorch's MKL exports no cblas_gemm_s8u8s32 (nm -D on 2.7.1 and 2.13), and
//               oneDNN's own C API is not exported either: _int_mm is the one int8 GEMM reachable.
// DJL_ATTN_CPU_GEMM=torch forces torch-mm for plain weights of every dtype and makes pack_weight
// produce plain copies (tests run both).
#pragma once

#include <cstdint>
#include <string>

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

// ---- weights prepared once ----------------------------------------------------------------
//
// pack_weight turns a float32 [n, k] weight into a blob (the uint8 tensor gemm_pack_weight
// returns): a 64-byte header, then the weight in the layout of its format. A blob is valid only
// in the process that made it (MKL's packed layout depends on the CPU and MKL's version): the
// header carries a per-process tag that read_packed checks.

enum class WeightFormat : int32_t {
  kPlain = 0,       // [n, k] in the stream's dtype, as stored (gemm_nt); never in a blob
  kMklFloat32 = 1,  // float32 in MKL's packed-B layout (cblas_sgemm_pack)
  kFloat32 = 2,     // float32 [n, k] (a libtorch without MKL's packed API, or DJL_ATTN_CPU_GEMM=torch)
  kBFloat16 = 3,    // bfloat16 [n, k]: the bfloat16 mode, activations rounded to bfloat16 per call
  kInt8 = 4,        // the int8 mode: float32 scales [n], then int8 [k, n] (w / scale rounded);
                    // scale = max |w[j, :]| / 127 per output channel j (symmetric)
};

// What gemm_pack_weight(weight, mode) makes: its `mode` argument.
enum class PackMode : int64_t {
  kFloat32 = 0,   // float32_pack_format()
  kBFloat16 = 1,  // kBFloat16
  kInt8 = 2,      // kInt8
};

// Whether this libtorch has the int8 GEMM the int8 mode needs (aten::_int_mm in its C shim).
bool int8_available();

// A projection's weight as the fused layers read it.
struct Weight {
  WeightFormat format;
  const void* data;  // kPlain: [n, k] of the stream's dtype; else the blob's payload
  int64_t n, k;      // out, in
};

// The float32 format pack_weight makes when not asked for bfloat16: kMklFloat32 when libtorch
// exports MKL's packed API (and DJL_ATTN_CPU_GEMM is not "torch"), else kFloat32.
WeightFormat float32_pack_format();

// Bytes of the blob for a [n, k] weight in `format` (header included); format is not kPlain.
int64_t packed_bytes(WeightFormat format, int64_t n, int64_t k);

// Writes the blob of float32 [n, k] `w` (contiguous) in `format` to `blob` (packed_bytes, 64-byte
// aligned). Throws NativeError when the backend fails.
void pack_weight(const float* w, int64_t n, int64_t k, WeightFormat format, void* blob);

// The weight a blob of `bytes` bytes holds, or false with the reason in `why` ("not a packed
// weight", "packed in another process", ...).
bool read_packed(const void* blob, int64_t bytes, Weight* out, std::string* why);

// c[m, n] = a[m, k] · wᵀ for any weight form. Plain weights are of `dtype` (the stream's, also of
// a and c); blobs need a float32 stream. `scratch` holds scratch_bytes(w, m) bytes (64-aligned).
struct Gemm {
  const void* a;  // [m, k], row stride lda
  int64_t lda;
  Weight w;
  void* c;        // [m, n], contiguous (overwritten)
  int64_t m;
  ElementType dtype;
  void* scratch;
};
int64_t scratch_bytes(const Weight& w, int64_t m);
void gemm(const Gemm& g);

// The backend a weight form runs on: "mkl-sgemm", "mkl-packed", "torch-mm", "torch-mm-bf16",
// "torch-int8".
const char* gemm_backend(const Weight& w, ElementType dtype);

}  // namespace djl_attn::gemm
