// Our own declarations of the PyTorch stable C shim functions the library uses.
//
// Where the contract comes from: libtorch exports these `aoti_torch_*` C functions from
// libtorch_cpu.so (and `aoti_torch_get_current_cuda_stream` from libtorch_cuda.so) since 2.7;
// they are declared upstream in torch/csrc/inductor/aoti_torch/c/shim.h and form the base of
// the LibTorch Stable ABI. We declare only the signatures we call, as function-pointer types,
// and resolve them at load time with dlopen(RTLD_NOLOAD) + dlsym on the copy of libtorch that
// the host process (DJL or Python) already loaded. No libtorch header or library is needed to
// build, and one binary runs under libtorch 2.7.1 (DJL) and torch 2.11 / 2.13 (Python).
#pragma once

#include <cstdint>

namespace djl_attn::shim {

// Opaque handles: an AtenTensorHandle is an `at::Tensor*` owned by whoever received it new.
struct AtenTensorOpaque;
using AtenTensorHandle = AtenTensorOpaque*;
struct TorchLibraryOpaque;
using TorchLibraryHandle = TorchLibraryOpaque*;
using StableIValue = uint64_t;
using AOTITorchError = int32_t;  // 0 = success
using BoxedKernel = void (*)(StableIValue* stack, uint64_t num_args, uint64_t num_outputs);

// The dtype and device-type codes of this libtorch, read once: comparing a tensor's code with
// these costs no call (the getters are functions of the shim).
struct TorchCodes {
  int32_t float32, float16, bfloat16, int32, int64, uint8, float8_e4m3fn, float8_e5m2;
  int32_t cpu, cuda;
};

// One pointer per shim function we use; filled by resolve().
struct TorchApi {
  int32_t (*dtype_float32)();
  int32_t (*dtype_float16)();
  int32_t (*dtype_bfloat16)();
  int32_t (*dtype_int32)();
  int32_t (*dtype_int64)();
  int32_t (*dtype_uint8)();
  int32_t (*dtype_float8_e4m3fn)();
  int32_t (*dtype_float8_e5m2)();
  int32_t (*device_type_cpu)();
  int32_t (*device_type_cuda)();

  AOTITorchError (*get_data_ptr)(AtenTensorHandle, void** ret);
  AOTITorchError (*get_dim)(AtenTensorHandle, int64_t* ret);
  AOTITorchError (*get_sizes)(AtenTensorHandle, int64_t** ret);    // borrowed
  AOTITorchError (*get_strides)(AtenTensorHandle, int64_t** ret);  // borrowed
  AOTITorchError (*get_dtype)(AtenTensorHandle, int32_t* ret);
  AOTITorchError (*get_device_type)(AtenTensorHandle, int32_t* ret);
  AOTITorchError (*get_device_index)(AtenTensorHandle, int32_t* ret);
  AOTITorchError (*empty_strided)(int64_t ndim, const int64_t* sizes, const int64_t* strides,
                                  int32_t dtype, int32_t device_type, int32_t device_index,
                                  AtenTensorHandle* ret);
  AOTITorchError (*new_tensor_handle)(AtenTensorHandle orig, AtenTensorHandle* ret);
  AOTITorchError (*new_uninitialized_tensor)(AtenTensorHandle* ret);  // an undefined tensor
  AOTITorchError (*delete_tensor_object)(AtenTensorHandle);

  AOTITorchError (*library_init_def)(const char* ns, const char* file, uint32_t line,
                                     TorchLibraryHandle* ret);
  AOTITorchError (*library_init_impl)(const char* ns, const char* dispatch_key, const char* file,
                                      uint32_t line, TorchLibraryHandle* ret);
  AOTITorchError (*library_def)(TorchLibraryHandle, const char* schema);
  AOTITorchError (*library_impl)(TorchLibraryHandle, const char* name, BoxedKernel fn);
  AOTITorchError (*call_dispatcher)(const char* op_name, const char* overload_name,
                                    StableIValue* stack);

  TorchCodes codes;  // the results of the dtype_* and device_type_* getters above
};

// The resolved API. Throws NativeError naming the missing symbol when libtorch is not loaded
// in this process or is older than 2.7. Thread-safe; resolves once.
const TorchApi& torch();

// Resolves `aoti_torch_get_current_cuda_stream` from libtorch_cuda.so, or returns null when
// libtorch_cuda.so is not loaded (a CPU-only torch).
using GetCurrentCudaStream = AOTITorchError (*)(int32_t device_index, void** ret_stream);
GetCurrentCudaStream current_cuda_stream_fn();

// The shim functions the GEMM layer (src/gemm) calls, resolved on first use rather than at load:
// the library loads without them, and only a GEMM that needs one reports its absence.
struct TorchMatmulApi {
  AOTITorchError (*create_tensor_from_blob)(void* data, int64_t ndim, const int64_t* sizes,
                                            const int64_t* strides, int64_t storage_offset,
                                            int32_t dtype, int32_t device_type,
                                            int32_t device_index, AtenTensorHandle* ret);
  AOTITorchError (*mm_out)(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2);
};

// Throws NativeError naming a missing symbol. Thread-safe; resolves once.
const TorchMatmulApi& torch_matmul();

// libtorch's int8 GEMM for the GEMM layer's int8 mode (aten::_int_mm: int8 x int8 -> int32,
// oneDNN's s8s8s32 matmul inside libtorch), resolved on first use. Both exist in 2.7.1 and
// 2.13 (checked with nm -D); a libtorch without them leaves the members null.
struct TorchInt8Api {
  int32_t (*dtype_int8)();
  AOTITorchError (*int_mm_out)(AtenTensorHandle out, AtenTensorHandle self,
                               AtenTensorHandle mat2);
  bool present() const { return dtype_int8 != nullptr && int_mm_out != nullptr; }
};

// Thread-safe; resolves once; never throws (check present()).
const TorchInt8Api& torch_int8();

// A symbol of the loaded libtorch_cpu.so outside the shim (the BLAS it carries, e.g. MKL's
// sgemm_), or null when it does not export one by that name.
void* libtorch_cpu_symbol(const char* name);

// The name of a dtype code of this libtorch ("float64", "bool", ...), for error messages about
// dtypes the kernels do not take; null for a code none of the shim's dtype getters returns.
const char* dtype_code_name(int32_t code);

}  // namespace djl_attn::shim
