#include "common/tensor.h"

#include "common/error.h"

namespace djl_attn {
namespace {

void check_shim(shim::AOTITorchError code, const char* what) {
  if (code != 0) fail_native("PyTorch shim call ", what, " failed (error ", code, ")");
}

}  // namespace

int32_t torch_dtype_code(DType dtype) {
  const auto& api = shim::torch();
  switch (dtype) {
    case DType::kFloat32: return api.dtype_float32();
    case DType::kFloat16: return api.dtype_float16();
    case DType::kBFloat16: return api.dtype_bfloat16();
    case DType::kInt32: return api.dtype_int32();
    case DType::kInt64: return api.dtype_int64();
    case DType::kUInt8: return api.dtype_uint8();
    case DType::kFloat8E4M3FN: return api.dtype_float8_e4m3fn();
    case DType::kOther: break;
  }
  fail_native("no PyTorch dtype for ", dtype_name(dtype));
}


int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt64: return 8;
    case DType::kUInt8: case DType::kFloat8E4M3FN: return 1;
    case DType::kOther: break;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kOther: return "an unsupported dtype";
  }
  return "?";
}

std::string Device::str() const {
  switch (type) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return "cuda:" + std::to_string(index);
    case DeviceType::kOther: return "device type other than cpu/cuda";
  }
  return "?";
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) shim::torch().delete_tensor_object(handle_);
    handle_ = other.release();
  }
  return *this;
}

Tensor::~Tensor() {
  // Deleting cannot meaningfully fail; a destructor must not throw.
  if (handle_ != nullptr) shim::torch().delete_tensor_object(handle_);
}

shim::AtenTensorHandle Tensor::release() {
  shim::AtenTensorHandle handle = handle_;
  handle_ = nullptr;
  return handle;
}

int64_t Tensor::dim() const {
  int64_t dim = 0;
  check_shim(shim::torch().get_dim(handle_, &dim), "get_dim");
  return dim;
}

int64_t Tensor::size(int64_t d) const {
  int64_t* sizes = nullptr;
  check_shim(shim::torch().get_sizes(handle_, &sizes), "get_sizes");
  return sizes[d < 0 ? d + dim() : d];
}

int64_t Tensor::stride(int64_t d) const {
  int64_t* strides = nullptr;
  check_shim(shim::torch().get_strides(handle_, &strides), "get_strides");
  return strides[d < 0 ? d + dim() : d];
}

std::vector<int64_t> Tensor::sizes() const {
  int64_t* sizes = nullptr;
  check_shim(shim::torch().get_sizes(handle_, &sizes), "get_sizes");
  return std::vector<int64_t>(sizes, sizes + dim());
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes()) n *= s;
  return n;
}

DType Tensor::dtype() const {
  const auto& api = shim::torch();
  int32_t code = 0;
  check_shim(api.get_dtype(handle_, &code), "get_dtype");
  if (code == api.dtype_float32()) return DType::kFloat32;
  if (code == api.dtype_float16()) return DType::kFloat16;
  if (code == api.dtype_bfloat16()) return DType::kBFloat16;
  if (code == api.dtype_int32()) return DType::kInt32;
  if (code == api.dtype_int64()) return DType::kInt64;
  if (code == api.dtype_uint8()) return DType::kUInt8;
  if (code == api.dtype_float8_e4m3fn()) return DType::kFloat8E4M3FN;
  return DType::kOther;
}

std::string Tensor::dtype_str() const {
  const DType known = dtype();
  if (known != DType::kOther) return dtype_name(known);
  int32_t code = 0;
  check_shim(shim::torch().get_dtype(handle_, &code), "get_dtype");
  const char* name = shim::dtype_code_name(code);
  return name != nullptr ? name : "dtype code " + std::to_string(code);
}

Device Tensor::device() const {
  const auto& api = shim::torch();
  int32_t type = 0;
  int32_t index = 0;
  check_shim(api.get_device_type(handle_, &type), "get_device_type");
  check_shim(api.get_device_index(handle_, &index), "get_device_index");
  if (type == api.device_type_cpu()) return {DeviceType::kCpu, -1};
  if (type == api.device_type_cuda()) return {DeviceType::kCuda, index};
  return {DeviceType::kOther, index};
}

void* Tensor::data() const {
  void* ptr = nullptr;
  check_shim(shim::torch().get_data_ptr(handle_, &ptr), "get_data_ptr");
  return ptr;
}

Tensor Tensor::empty(const std::vector<int64_t>& sizes, DType dtype, Device device) {
  const auto& api = shim::torch();
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i] > 0 ? sizes[i] : 1;
  }
  int32_t device_type =
      device.type == DeviceType::kCuda ? api.device_type_cuda() : api.device_type_cpu();
  shim::AtenTensorHandle handle = nullptr;
  shim::AOTITorchError code =
      api.empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(),
                        torch_dtype_code(dtype), device_type,
                        device.type == DeviceType::kCuda ? device.index : 0, &handle);
  if (code != 0) {
    fail_native("allocating a ", dtype_name(dtype), " tensor of shape ", shape_str(sizes), " on ",
                device.str(), " failed (out of memory?)");
  }
  return Tensor(handle);
}

Tensor Tensor::from_blob(void* data, const std::vector<int64_t>& sizes,
                         const std::vector<int64_t>& strides, DType dtype, Device device) {
  const auto& api = shim::torch();
  const int32_t device_type =
      device.type == DeviceType::kCuda ? api.device_type_cuda() : api.device_type_cpu();
  shim::AtenTensorHandle handle = nullptr;
  check_shim(shim::torch_matmul().create_tensor_from_blob(
                 data, static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), 0,
                 torch_dtype_code(dtype), device_type,
                 device.type == DeviceType::kCuda ? device.index : 0, &handle),
             "create_tensor_from_blob");
  return Tensor(handle);
}

std::string shape_str(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

}  // namespace djl_attn
