// An owning view of a PyTorch tensor handle through the stable C shim, and the few facts about
// it that kernels need (sizes, strides in elements, dtype, device, data pointer).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "shim/torch_shim.h"

namespace djl_attn {

// kUInt8, kFloat8E4M3FN and kFloat8E5M2: the storage of an FP8 KV cache (paged operators only).
enum class DType {
  kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kFloat8E4M3FN, kFloat8E5M2, kOther
};
const char* dtype_name(DType dtype);
// Bytes per element of a DType (0 for kOther).
int64_t dtype_size(DType dtype);
// The libtorch dtype code of a DType (not kOther).
int32_t torch_dtype_code(DType dtype);

enum class DeviceType { kCpu, kCuda, kOther };

struct Device {
  DeviceType type;
  int32_t index;  // -1 on the CPU
  bool operator==(const Device& other) const {
    return type == other.type && index == other.index;
  }
  bool operator!=(const Device& other) const { return !(*this == other); }
  std::string str() const;  // "cpu", "cuda:0"
};

// Owns one AtenTensorHandle: deletes it on destruction, moves but never copies. Accessors throw
// NativeError when a shim call fails.
//
// The metadata is read through the shim once per Tensor and kept: the rank, sizes and strides on
// first use of any of them (libtorch's own arrays, borrowed: no binding resizes a tensor while it
// holds it), the dtype and the device on first use of each. A binding's checks ask the same
// questions of each argument many times; each shim call is a call into libtorch.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(shim::AtenTensorHandle handle) : handle_(handle) {}
  Tensor(Tensor&& other) noexcept
      : dim_(other.dim_),
        sizes_(other.sizes_),
        strides_(other.strides_),
        dtype_code_(other.dtype_code_),
        device_(other.device_),
        device_known_(other.device_known_) {
    handle_ = other.release();
  }
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor();

  bool defined() const { return handle_ != nullptr; }
  shim::AtenTensorHandle get() const { return handle_; }
  // Gives up ownership (for returning the handle through the dispatcher stack).
  shim::AtenTensorHandle release();

  int64_t dim() const;
  int64_t size(int64_t d) const;     // d may be negative, counted from the end
  int64_t stride(int64_t d) const;   // in elements
  std::vector<int64_t> sizes() const;
  int64_t numel() const;
  DType dtype() const;
  // The dtype's name, also for dtypes outside DType ("float64", "bool"): for messages.
  std::string dtype_str() const;
  Device device() const;
  void* data() const;
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // A contiguous tensor from PyTorch's allocator (its caching allocator on CUDA).
  static Tensor empty(const std::vector<int64_t>& sizes, DType dtype, Device device);
  // A tensor over memory this library owns (strides in elements); the memory must outlive it.
  static Tensor from_blob(void* data, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, DType dtype, Device device);

 private:
  static constexpr int32_t kUnknownDtype = INT32_MIN;
  void read_shape() const;  // dim_, sizes_, strides_
  int32_t dtype_code() const;

  shim::AtenTensorHandle handle_ = nullptr;
  mutable int64_t dim_ = -1;  // -1: not read yet
  mutable const int64_t* sizes_ = nullptr;
  mutable const int64_t* strides_ = nullptr;
  mutable int32_t dtype_code_ = kUnknownDtype;
  mutable Device device_{DeviceType::kOther, -1};
  mutable bool device_known_ = false;
};

// "[2, 3, 4]"
std::string shape_str(const std::vector<int64_t>& sizes);

}  // namespace djl_attn
