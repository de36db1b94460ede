#include "gemm/gemm.h"

#include <limits>

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

}  // namespace

void gemm_nt(const GemmNT& g) {
  if (g.m == 0 || g.n == 0) return;
  if (use_mkl(g.dtype)) return sgemm_nt(g);
  torch_mm_nt(g);
}

const char* gemm_backend(ElementType dtype) { return use_mkl(dtype) ? "mkl-sgemm" : "torch-mm"; }

}  // namespace djl_attn::gemm
