#include "gemm/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/half.h"
#include "common/thread_pool.h"

#include "common/error.h"
#include "common/options.h"
#include "common/tensor.h"
#include "shim/torch_shim.h"

namespace djl_attn::gemm {
namespace {

Option kCpuGemm("DJL_ATTN_CPU_GEMM", {"auto", "torch"},
                "the CPU GEMM layer's float32 backend: MKL's sgemm_ when libtorch exports it, or "
                "libtorch's mm (tests)");

// Fortran BLAS sgemm (MKL's LP64 interface: 32-bit integers; the character lengths Fortran
// passes after the arguments are ignored by MKL for one-character options).
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);

Sgemm mkl_sgemm() {
  static const Sgemm fn = reinterpret_cast<Sgemm>(shim::libtorch_cpu_symbol("sgemm_"));
  return fn;
}

bool use_mkl(ElementType dtype) {
  return dtype == ElementType::kFloat32 && !kCpuGemm.is("torch") && mkl_sgemm() != nullptr;
}

DType dtype_of(ElementType t) {
  switch (t) {
    case ElementType::kFloat32: return DType::kFloat32;
    case ElementType::kFloat16: return DType::kFloat16;
    case ElementType::kBFloat16: return DType::kBFloat16;
  }
  return DType::kOther;
}

// MKL's packed-B API (CBLAS, LP64): the weight is packed once into MKL's own blocked layout, so
// a product no longer re-packs it, which at M = 16 costs as much as the multiply-adds.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kPacked = 151, kBMatrix = 162;
using SgemmPackGetSize = size_t (*)(int identifier, int m, int n, int k);
using SgemmPack = void (*)(int layout, int identifier, int trans, int m, int n, int k, float alpha,
                           const float* src, int ld, float* dest);
using SgemmCompute = void (*)(int layout, int transa, int transb, int m, int n, int k,
                              const float* a, int lda, const float* b, int ldb, float beta,
                              float* c, int ldc);

struct MklPackedApi {
  SgemmPackGetSize get_size;
  SgemmPack pack;
  SgemmCompute compute;
  bool present() const { return get_size && pack && compute; }
};

const MklPackedApi& mkl_packed() {
  static const MklPackedApi api{
      reinterpret_cast<SgemmPackGetSize>(shim::libtorch_cpu_symbol("cblas_sgemm_pack_get_size")),
      reinterpret_cast<SgemmPack>(shim::libtorch_cpu_symbol("cblas_sgemm_pack")),
      reinterpret_cast<SgemmCompute>(shim::libtorch_cpu_symbol("cblas_sgemm_compute"))};
  return api;
}

int to_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    fail_native("gemm: ", what, " = ", v, " is beyond MKL's 32-bit interface");
  }
  return static_cast<int>(v);
}

// Row-major c[m, n] = a[m, k] · w[n, k]ᵀ is column-major cᵀ[n, m] = (w as [k, n])ᵀ · aᵀ.
void sgemm_nt(const GemmNT& g) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m > kMax || g.n > kMax || g.k > kMax || g.lda > kMax) {
    fail_native("gemm: sizes beyond MKL's 32-bit interface: m ", g.m, ", n ", g.n, ", k ", g.k);
  }
  const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.k), ldb = static_cast<int>(g.lda), ldc = m;
  const float one = 1.f, zero = 0.f;
  mkl_sgemm()("T", "N", &m, &n, &k, &one, static_cast<const float*>(g.w), &lda,
              static_cast<const float*>(g.a), &ldb, &zero, static_cast<float*>(g.c), &ldc);
}

// libtorch's mm on tensors over the caller's memory: out [m, n] = a [m, k] · wᵀ [k, n].
void torch_mm_nt(const GemmNT& g) {
  const DType dtype = dtype_of(g.dtype);
  const Device cpu{DeviceType::kCpu, -1};
  Tensor a = Tensor::from_blob(const_cast<void*>(g.a), {g.m, g.k}, {g.lda, 1}, dtype, cpu);
  Tensor wt = Tensor::from_blob(const_cast<void*>(g.w), {g.k, g.n}, {1, g.k}, dtype, cpu);
  Tensor c = Tensor::from_blob(g.c, {g.m, g.n}, {g.n, 1}, dtype, cpu);
  if (shim::torch_matmul().mm_out(c.get(), a.get(), wt.get()) != 0) {
    fail_native("gemm: libtorch mm_out failed for [", g.m, ", ", g.k, "] x [", g.k, ", ", g.n,
                "]");
  }
}

// ---- blobs -------------------------------------------------------------------------------

constexpr char kMagic[8] = {'d', 'j', 'l', 'g', 'e', 'm', 'm', '1'};
constexpr int64_t kHeaderBytes = 64;

// The first 64 bytes of a blob.
struct BlobHeader {
  char magic[8];
  uint64_t process_tag;  // process_tag() of the process that packed it
  int32_t format;        // WeightFormat
  int32_t reserved;
  int64_t n, k;
  int64_t payload_bytes;
};
static_assert(sizeof(BlobHeader) <= kHeaderBytes);

// A random tag drawn once per process: a blob saved to disk or sent to another process does not
// carry a layout that process's MKL can read, and is refused rather than misread.
uint64_t process_tag() {
  static const uint64_t tag = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ 1;
  }();
  return tag;
}

constexpr int64_t kAlign = 64;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// kInt8 payload: float32 scales [n], then (64-aligned) int8 [k, n].
int64_t int8_payload_offset(int64_t n) { return aligned(n * 4); }

int64_t payload_bytes(WeightFormat format, int64_t n, int64_t k) {
  switch (format) {
    case WeightFormat::kMklFloat32:
      return static_cast<int64_t>(
          mkl_packed().get_size(kBMatrix, 1, to_int(n, "n"), to_int(k, "k")));
    case WeightFormat::kFloat32: return n * k * 4;
    case WeightFormat::kBFloat16: return n * k * 2;
    case WeightFormat::kInt8: return int8_payload_offset(n) + n * k;
    case WeightFormat::kPlain: break;
  }
  fail_native("gemm: no blob for weight format ", static_cast<int>(format));
}

// Rows [0, m) of fn(row), on the library's pool when the pass is large.
template <typename Fn>
void for_rows(int64_t m, int64_t row_elements, const Fn& fn) {
  const int64_t grain = m * row_elements < (1 << 16) ? m : 1;
  parallel_for(m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

// The bfloat16 mode: a rounded to bfloat16, libtorch's bfloat16 mm (oneDNN, AMX where the CPU
// has it) into bfloat16, widened into c. Scratch: [m, k] then [m, n] bfloat16.
void bf16_gemm(const Gemm& g) {
  const int64_t m = g.m, n = g.w.n, k = g.w.k;
  auto* a16 = static_cast<BFloat16*>(g.scratch);
  auto* c16 = reinterpret_cast<BFloat16*>(static_cast<char*>(g.scratch) + aligned(m * k * 2));
  const float* a = static_cast<const float*>(g.a);
  for_rows(m, k, [&](int64_t r) {
    const float* src = a + r * g.lda;
    BFloat16* dst = a16 + r * k;
    for (int64_t j = 0; j < k; ++j) dst[j] = from_float<BFloat16>(src[j]);
  });
  torch_mm_nt({a16, k, g.w.data, c16, m, n, k, ElementType::kBFloat16});
  float* c = static_cast<float*>(g.c);
  for_rows(m, n, [&](int64_t r) {
    const BFloat16* src = c16 + r * n;
    float* dst = c + r * n;
    for (int64_t j = 0; j < n; ++j) dst[j] = to_float(src[j]);
  });
}

// Symmetric int8 of one row: q = round(x * 127 / max |x|) (to nearest even), returns the scale
// max |x| / 127 (0 for an all-zero row, whose q is all 0). A row holding NaN or infinity gets a
// NaN scale, so its outputs are NaN as the float32 product's would be (no exception from a pool
// worker). Both loops vectorize: a per-element nearbyintf call made quantization 20% of a
// 4096-token layer. Compiled for AVX-512, AVX2 and the baseline, picked at load (ifunc): on the
// baseline's SSE2 alone quantizing and rescaling took 56% of the int8 GEMMs' own time at 1024
// tokens (perf, 2026-11-27).
#define DJL_ATTN_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
DJL_ATTN_ROW_CLONES float quantize_row(const float* x, int64_t k, int8_t* q) {
  float amax = 0.f;
  float probe = 0.f;  // NaN when the row holds NaN or infinity (inf * 0 is NaN)
#pragma omp simd reduction(max : amax) reduction(+ : probe)
  for (int64_t j = 0; j < k; ++j) {
    amax = std::max(amax, std::fabs(x[j]));
    probe += x[j] * 0.f;
  }
  if (probe != 0.f || amax == 0.f) {
    std::memset(q, 0, static_cast<size_t>(k));
    return probe != 0.f ? std::numeric_limits<float>::quiet_NaN() : 0.f;
  }
  const float inv = 127.f / amax;
  // Adding and subtracting 1.5 * 2^23 rounds |v| <= 127 to the nearest integer, ties to even
  // (the default rounding mode), in plain vector arithmetic.
  constexpr float kRound = 12582912.f;
#pragma omp simd
  for (int64_t j = 0; j < k; ++j) {
    const float r = (x[j] * inv + kRound) - kRound;
    q[j] = static_cast<int8_t>(static_cast<int32_t>(r));
  }
  return amax / 127.f;
}

// c[j] = c32[j] * (row_scale * w_scale[j]) for one row of n.
DJL_ATTN_ROW_CLONES void rescale_row(const int32_t* c32, float row_scale, const float* w_scale,
                                     int64_t n, float* c) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) c[j] = static_cast<float>(c32[j]) * (row_scale * w_scale[j]);
}

// libtorch's c32 [m, n] = a8 [m, k] · b8 [k, n] (aten::_int_mm through the C shim).
void torch_int_mm(const int8_t* a8, const int8_t* b8, int32_t* c32, int64_t m, int64_t n,
                  int64_t k) {
  const auto& i8 = shim::torch_int8();
  if (!i8.present()) fail_native("gemm: int8 mode: this libtorch exports no _int_mm");
  const auto& api = shim::torch_matmul();
  const int32_t cpu = shim::torch().device_type_cpu();
  const int64_t a_sizes[] = {m, k}, a_strides[] = {k, 1};
  const int64_t b_sizes[] = {k, n}, b_strides[] = {n, 1};
  const int64_t c_sizes[] = {m, n}, c_strides[] = {n, 1};
  shim::AtenTensorHandle a = nullptr, b = nullptr, c = nullptr;
  const bool made =
      api.create_tensor_from_blob(const_cast<int8_t*>(a8), 2, a_sizes, a_strides, 0,
                                  i8.dtype_int8(), cpu, 0, &a) == 0 &&
      api.create_tensor_from_blob(const_cast<int8_t*>(b8), 2, b_sizes, b_strides, 0,
                                  i8.dtype_int8(), cpu, 0, &b) == 0 &&
      api.create_tensor_from_blob(c32, 2, c_sizes, c_strides, 0, shim::torch().dtype_int32(),
                                  cpu, 0, &c) == 0;
  // Owned from here on: Tensor deletes each handle.
  Tensor at(a), bt(b), ct(c);
  if (!made) fail_native("gemm: int8 mode: create_tensor_from_blob failed");
  if (i8.int_mm_out(c, a, b) != 0) {
    fail_native("gemm: libtorch _int_mm_out failed for [", m, ", ", k, "] x [", k, ", ", n, "]");
  }
}

// The int8 mode: each row of a quantized to int8 with its own scale (dynamic, per row), the
// int8 product on libtorch, then c[r, j] = c32[r, j] * row_scale[r] * weight_scale[j].
// Scratch: a8 [m, k] int8, row scales [m] float32, c32 [m, n] int32.
void int8_gemm(const Gemm& g) {
  const int64_t m = g.m, n = g.w.n, k = g.w.k;
  auto* a8 = static_cast<int8_t*>(g.scratch);
  auto* row_scale = reinterpret_cast<float*>(static_cast<char*>(g.scratch) + aligned(m * k));
  auto* c32 = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(row_scale) + aligned(m * 4));
  const float* a = static_cast<const float*>(g.a);
  for_rows(m, k, [&](int64_t r) { row_scale[r] = quantize_row(a + r * g.lda, k, a8 + r * k); });
  const auto* w_scale = static_cast<const float*>(g.w.data);
  const auto* w8 = reinterpret_cast<const int8_t*>(static_cast<const char*>(g.w.data) +
                                                   int8_payload_offset(n));
  torch_int_mm(a8, w8, c32, m, n, k);
  float* c = static_cast<float*>(g.c);
  for_rows(m, n, [&](int64_t r) { rescale_row(c32 + r * n, row_scale[r], w_scale, n, c + r * n); });
}

}  // namespace

bool int8_available() { return shim::torch_int8().present(); }

void gemm_nt(const GemmNT& g) {
  if (g.m == 0 || g.n == 0) return;
  if (use_mkl(g.dtype)) return sgemm_nt(g);
  torch_mm_nt(g);
}

const char* gemm_backend(ElementType dtype) { return use_mkl(dtype) ? "mkl-sgemm" : "torch-mm"; }

WeightFormat float32_pack_format() {
  return !kCpuGemm.is("torch") && mkl_packed().present() ? WeightFormat::kMklFloat32
                                                          : WeightFormat::kFloat32;
}

int64_t packed_bytes(WeightFormat format, int64_t n, int64_t k) {
  return kHeaderBytes + payload_bytes(format, n, k);
}

void pack_weight(const float* w, int64_t n, int64_t k, WeightFormat format, void* blob) {
  BlobHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.process_tag = process_tag();
  h.format = static_cast<int32_t>(format);
  h.n = n;
  h.k = k;
  h.payload_bytes = payload_bytes(format, n, k);
  std::memset(blob, 0, kHeaderBytes);
  std::memcpy(blob, &h, sizeof(h));
  char* payload = static_cast<char*>(blob) + kHeaderBytes;
  switch (format) {
    case WeightFormat::kMklFloat32:
      // B = wᵀ [k, n] read from w [n, k] row-major: transposed, leading dimension k.
      mkl_packed().pack(kRowMajor, kBMatrix, kTrans, 1, to_int(n, "n"), to_int(k, "k"), 1.f, w,
                        to_int(k, "k"), reinterpret_cast<float*>(payload));
      return;
    case WeightFormat::kFloat32:
      std::memcpy(payload, w, static_cast<size_t>(n * k * 4));
      return;
    case WeightFormat::kBFloat16: {
      auto* dst = reinterpret_cast<BFloat16*>(payload);
      for (int64_t i = 0; i < n * k; ++i) dst[i] = from_float<BFloat16>(w[i]);
      return;
    }
    case WeightFormat::kInt8: {
      auto* scale = reinterpret_cast<float*>(payload);
      auto* q = reinterpret_cast<int8_t*>(payload + int8_payload_offset(n));  // [k, n]
      for (int64_t j = 0; j < n; ++j) {
        const float* row = w + j * k;
        float amax = 0.f;
        for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
        if (!std::isfinite(amax)) fail_native("gemm: int8 mode: weight row ", j, " is not finite");
        scale[j] = amax / 127.f;
        const float inv = amax > 0.f ? 127.f / amax : 0.f;
        for (int64_t i = 0; i < k; ++i) {
          q[i * n + j] = static_cast<int8_t>(std::nearbyint(row[i] * inv));
        }
      }
      return;
    }
    case WeightFormat::kPlain: break;
  }
  fail_native("gemm: cannot pack into weight format ", static_cast<int>(format));
}

bool read_packed(const void* blob, int64_t bytes, Weight* out, std::string* why) {
  BlobHeader h;
  if (bytes < kHeaderBytes) {
    *why = "not a packed weight (shorter than its 64-byte header)";
    return false;
  }
  std::memcpy(&h, blob, sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    *why = "not a packed weight (no gemm_pack_weight header)";
    return false;
  }
  if (h.process_tag != process_tag()) {
    *why = "packed in another process (a packed weight is valid only in the process that packed "
           "it: pack again after loading)";
    return false;
  }
  const auto format = static_cast<WeightFormat>(h.format);
  if (format != WeightFormat::kMklFloat32 && format != WeightFormat::kFloat32 &&
      format != WeightFormat::kBFloat16 && format != WeightFormat::kInt8) {
    *why = "unknown weight format " + std::to_string(h.format);
    return false;
  }
  if (h.n < 1 || h.k < 1 || bytes != kHeaderBytes + h.payload_bytes) {
    *why = "a corrupted header (" + std::to_string(bytes) + " bytes for [" + std::to_string(h.n) +
           ", " + std::to_string(h.k) + "])";
    return false;
  }
  *out = Weight{format, static_cast<const char*>(blob) + kHeaderBytes, h.n, h.k};
  return true;
}

int64_t scratch_bytes(const Weight& w, int64_t m) {
  switch (w.format) {
    case WeightFormat::kBFloat16: return aligned(m * w.k * 2) + aligned(m * w.n * 2);
    case WeightFormat::kInt8: return aligned(m * w.k) + aligned(m * 4) + aligned(m * w.n * 4);
    default: return 0;
  }
}

void gemm(const Gemm& g) {
  if (g.m == 0) return;
  switch (g.w.format) {
    case WeightFormat::kPlain:
      return gemm_nt({g.a, g.lda, g.w.data, g.c, g.m, g.w.n, g.w.k, g.dtype});
    case WeightFormat::kFloat32:
      return gemm_nt({g.a, g.lda, g.w.data, g.c, g.m, g.w.n, g.w.k, ElementType::kFloat32});
    case WeightFormat::kMklFloat32: {
      const int m = to_int(g.m, "m"), n = to_int(g.w.n, "n"), k = to_int(g.w.k, "k");
      mkl_packed().compute(kRowMajor, kNoTrans, kPacked, m, n, k,
                           static_cast<const float*>(g.a), to_int(g.lda, "lda"),
                           static_cast<const float*>(g.w.data), n, 0.f,
                           static_cast<float*>(g.c), n);
      return;
    }
    case WeightFormat::kBFloat16:
      return bf16_gemm(g);
    case WeightFormat::kInt8:
      return int8_gemm(g);
  }
}

const char* gemm_backend(const Weight& w, ElementType dtype) {
  switch (w.format) {
    case WeightFormat::kPlain: return gemm_backend(dtype);
    case WeightFormat::kFloat32: return gemm_backend(ElementType::kFloat32);
    case WeightFormat::kMklFloat32: return "mkl-packed";
    case WeightFormat::kBFloat16: return "torch-mm-bf16";
    case WeightFormat::kInt8: return "torch-int8";
  }
  return "?";
}

}  // namespace djl_attn::gemm
