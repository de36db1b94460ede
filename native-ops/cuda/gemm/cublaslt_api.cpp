#include "cuda/gemm/cublaslt_api.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <mutex>
#include <string>

#include "common/error.h"

namespace djl_attn::cuda::lt {
namespace {

// The path of the first loaded shared object whose file name starts with "libcublasLt" (pip's
// nvidia-cublas names it libcublasLt.so.N; some libtorch bundles add a hash: libcublasLt-ab12.so.N).
int find_loaded(struct dl_phdr_info* info, size_t, void* data) {
  const char* path = info->dlpi_name;
  if (path == nullptr || *path == '\0') return 0;
  const char* slash = std::strrchr(path, '/');
  const char* file = slash == nullptr ? path : slash + 1;
  if (std::strncmp(file, "libcublasLt", 11) != 0) return 0;
  *static_cast<std::string*>(data) = path;
  return 1;
}

template <typename Fn>
void resolve(void* library, const char* name, Fn& slot) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (slot == nullptr) fail_native("cuBLASLt loaded in this process has no ", name);
}

Api load() {
  std::string path;
  dl_iterate_phdr(find_loaded, &path);
  if (path.empty()) {
    fail_native("no cuBLASLt (libcublasLt.so) is loaded in this process: the fused decoder layer "
                "on CUDA uses the cuBLASLt of the process's CUDA libtorch, which loads it with "
                "libtorch_cuda.so");
  }
  // RTLD_NOLOAD: a handle to the library already there, never a second copy.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) fail_native("dlopen(", path, ", RTLD_NOLOAD) failed: ", dlerror());
  Api api{};
  resolve(library, "cublasLtCreate", api.create);
  resolve(library, "cublasLtMatmulDescCreate", api.matmul_desc_create);
  resolve(library, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy);
  resolve(library, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set_attribute);
  resolve(library, "cublasLtMatrixLayoutCreate", api.matrix_layout_create);
  resolve(library, "cublasLtMatrixLayoutDestroy", api.matrix_layout_destroy);
  resolve(library, "cublasLtMatmulPreferenceCreate", api.preference_create);
  resolve(library, "cublasLtMatmulPreferenceDestroy", api.preference_destroy);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute", api.preference_set_attribute);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", api.algo_get_heuristic);
  resolve(library, "cublasLtMatmul", api.matmul);
  resolve(library, "cublasLtGetVersion", api.get_version);
  // The handle stays open on purpose: the functions must outlive every caller.
  return api;
}

}  // namespace

const Api& api() {
  static std::once_flag once;
  static Api loaded{};
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

void check(Status status, const char* call) {
  if (status != kStatusSuccess) fail_native(call, " failed with cublasStatus_t ", status);
}

}  // namespace djl_attn::cuda::lt
