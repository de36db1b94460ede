#include "shim/torch_shim.h"

#include <dlfcn.h>

#include <mutex>
#include <utility>
#include <vector>

#include "common/error.h"

namespace djl_attn::shim {
namespace {

// RTLD_NOLOAD: never load a libtorch of our own; use the one the host process loaded (DJL
// extracts it to its cache, Python's torch package has its own). The soname finds either.
void* open_loaded(const char* soname) { return dlopen(soname, RTLD_NOW | RTLD_NOLOAD); }

template <typename Fn>
void resolve_symbol(void* library, const char* name, Fn& slot) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    fail_native("libtorch_cpu.so does not export ", name,
                ": djl-attention needs PyTorch 2.7 or newer (the stable C shim)");
  }
  slot = reinterpret_cast<Fn>(symbol);
}

TorchApi resolve_all() {
  void* library = open_loaded("libtorch_cpu.so");
  if (library == nullptr) {
    fail_native("libtorch_cpu.so is not loaded in this process: initialise PyTorch (DJL's "
                "PyTorch engine or `import torch`) before loading libdjl_attn.so");
  }
  TorchApi api{};
#define DJL_ATTN_RESOLVE(field) resolve_symbol(library, "aoti_torch_" #field, api.field)
  DJL_ATTN_RESOLVE(dtype_float32);
  DJL_ATTN_RESOLVE(dtype_float16);
  DJL_ATTN_RESOLVE(dtype_bfloat16);
  DJL_ATTN_RESOLVE(dtype_int32);
  DJL_ATTN_RESOLVE(dtype_int64);
  DJL_ATTN_RESOLVE(dtype_uint8);
  DJL_ATTN_RESOLVE(dtype_float8_e4m3fn);
  DJL_ATTN_RESOLVE(dtype_float8_e5m2);
  DJL_ATTN_RESOLVE(device_type_cpu);
  DJL_ATTN_RESOLVE(device_type_cuda);
  DJL_ATTN_RESOLVE(get_data_ptr);
  DJL_ATTN_RESOLVE(get_dim);
  DJL_ATTN_RESOLVE(get_sizes);
  DJL_ATTN_RESOLVE(get_strides);
  DJL_ATTN_RESOLVE(get_dtype);
  DJL_ATTN_RESOLVE(get_device_type);
  DJL_ATTN_RESOLVE(get_device_index);
  DJL_ATTN_RESOLVE(empty_strided);
  DJL_ATTN_RESOLVE(new_tensor_handle);
  DJL_ATTN_RESOLVE(new_uninitialized_tensor);
  DJL_ATTN_RESOLVE(delete_tensor_object);
  DJL_ATTN_RESOLVE(library_init_def);
  DJL_ATTN_RESOLVE(library_init_impl);
  DJL_ATTN_RESOLVE(library_def);
  DJL_ATTN_RESOLVE(library_impl);
  DJL_ATTN_RESOLVE(call_dispatcher);
#undef DJL_ATTN_RESOLVE
  api.codes = {api.dtype_float32(), api.dtype_float16(),   api.dtype_bfloat16(),
               api.dtype_int32(),   api.dtype_int64(),     api.dtype_uint8(),
               api.dtype_float8_e4m3fn(), api.dtype_float8_e5m2(), api.device_type_cpu(),
               api.device_type_cuda()};
  // The handle stays open on purpose: the functions must outlive every caller.
  return api;
}

}  // namespace

const TorchApi& torch() {
  // A function-local static is initialised once, thread-safely; if resolution throws, the next
  // call tries again (and reports the same error).
  static const TorchApi api = resolve_all();
  return api;
}

GetCurrentCudaStream current_cuda_stream_fn() {
  static const GetCurrentCudaStream fn = []() -> GetCurrentCudaStream {
    void* library = open_loaded("libtorch_cuda.so");
    if (library == nullptr) return nullptr;
    return reinterpret_cast<GetCurrentCudaStream>(
        dlsym(library, "aoti_torch_get_current_cuda_stream"));
  }();
  return fn;
}

const TorchMatmulApi& torch_matmul() {
  static const TorchMatmulApi api = [] {
    void* library = open_loaded("libtorch_cpu.so");
    if (library == nullptr) fail_native("libtorch_cpu.so is not loaded in this process");
    TorchMatmulApi out{};
    resolve_symbol(library, "aoti_torch_create_tensor_from_blob", out.create_tensor_from_blob);
    resolve_symbol(library, "aoti_torch_mm_out", out.mm_out);
    return out;
  }();
  return api;
}

const TorchInt8Api& torch_int8() {
  static const TorchInt8Api api = [] {
    TorchInt8Api out{};
    void* library = open_loaded("libtorch_cpu.so");
    if (library == nullptr) return out;
    out.dtype_int8 = reinterpret_cast<int32_t (*)()>(dlsym(library, "aoti_torch_dtype_int8"));
    out.int_mm_out = reinterpret_cast<decltype(out.int_mm_out)>(
        dlsym(library, "aoti_torch_cpu__int_mm_out"));
    return out;
  }();
  return api;
}

void* libtorch_cpu_symbol(const char* name) {
  void* library = open_loaded("libtorch_cpu.so");
  return library != nullptr ? dlsym(library, name) : nullptr;
}

const char* dtype_code_name(int32_t code) {
  // Each getter is looked up on its own and skipped when this libtorch lacks it: the names only
  // make messages clearer, they never decide anything.
  static const std::vector<std::pair<int32_t, const char*>> names = [] {
    static const char* const kDtypes[] = {
        "float32", "float16", "bfloat16", "float64", "int32", "int64", "int16", "int8",
        "uint8", "bool", "complex32", "complex64", "complex128", "float8_e4m3fn",
        "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64"};
    std::vector<std::pair<int32_t, const char*>> out;
    void* library = open_loaded("libtorch_cpu.so");
    if (library == nullptr) return out;
    for (const char* dtype : kDtypes) {
      const std::string symbol = std::string("aoti_torch_dtype_") + dtype;
      auto getter = reinterpret_cast<int32_t (*)()>(dlsym(library, symbol.c_str()));
      if (getter != nullptr) out.emplace_back(getter(), dtype);
    }
    return out;
  }();
  for (const auto& [dtype_code, name] : names) {
    if (dtype_code == code) return name;
  }
  return nullptr;
}

}  // namespace djl_attn::shim
