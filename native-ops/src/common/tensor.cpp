#include "common/tensor.h"

#include "common/error.h"

namespace djl_attn {
namespace {

void check_shim(shim::AOTITorchError code, const char* what) {
  if (code != 0) fail_native("PyTorch shim call ", what, " failed (error ", code, ")");
}

}  // namespace

int32_t torch_dtype_code(DType dtype) {
  const shim::TorchCodes& codes = shim::torch().codes;
  switch (dtype) {
    case DType::kFloat32: return codes.float32;
    case DType::kFloat16: return codes.float16;
    case DType::kBFloat16: return codes.bfloat16;
    case DType::kInt32: return codes.int32;
    case DType::kInt64: return codes.int64;
    case DType::kUInt8: return codes.uint8;
    case DType::kFloat8E4M3FN: return codes.float8_e4m3fn;
    case DType::kFloat8E5M2: return codes.float8_e5m2;
    case DType::kOther: break;
  }
  fail_native("no PyTorch dtype for ", dtype_name(dtype));
}


int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt64: return 8;
    case DType::kUInt8: case DType::kFloat8E4M3FN: case DType::kFloat8E5M2: return 1;
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
    case DType::kFloat8E5M2: return "float8_e5m2";
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
    dim_ = other.dim_;
    sizes_ = other.sizes_;
    strides_ = other.strides_;
    dtype_code_ = other.dtype_code_;
    device_ = other.device_;
    device_known_ = other.device_known_;
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
  dim_ = -1;
  sizes_ = nullptr;
  strides_ = nullptr;
  dtype_code_ = kUnknownDtype;
  device_known_ = false;
  return handle;
}

void Tensor::read_shape() const {
  const auto& api = shim::torch();
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  check_shim(api.get_dim(handle_, &dim), "get_dim");
  check_shim(api.get_sizes(handle_, &sizes), "get_sizes");
  check_shim(api.get_strides(handle_, &strides), "get_strides");
  sizes_ = sizes;
  strides_ = strides;
  dim_ = dim;
}

int64_t Tensor::dim() const {
  if (dim_ < 0) read_shape();
  return dim_;
}

int64_t Tensor::size(int64_t d) const {
  if (dim_ < 0) read_shape();
  return sizes_[d < 0 ? d + dim_ : d];
}

int64_t Tensor::stride(int64_t d) const {
  if (dim_ < 0) read_shape();
  return strides_[d < 0 ? d + dim_ : d];
}

std::vector<int64_t> Tensor::sizes() const {
  if (dim_ < 0) read_shape();
  return std::vector<int64_t>(sizes_, sizes_ + dim_);
}

int64_t Tensor::numel() const {
  if (dim_ < 0) read_shape();
  int64_t n = 1;
  for (int64_t d = 0; d < dim_; ++d) n *= sizes_[d];
  return n;
}

int32_t Tensor::dtype_code() const {
  if (dtype_code_ == kUnknownDtype) {
    int32_t code = 0;
    check_shim(shim::torch().get_dtype(handle_, &code), "get_dtype");
    dtype_code_ = code;
  }
  return dtype_code_;
}

DType Tensor::dtype() const {
  const shim::TorchCodes& codes = shim::torch().codes;
  const int32_t code = dtype_code();
  if (code == codes.float32) return DType::kFloat32;
  if (code == codes.float16) return DType::kFloat16;
  if (code == codes.bfloat16) return DType::kBFloat16;
  if (code == codes.int32) return DType::kInt32;
  if (code == codes.int64) return DType::kInt64;
  if (code == codes.uint8) return DType::kUInt8;
  if (code == codes.float8_e4m3fn) return DType::kFloat8E4M3FN;
  if (code == codes.float8_e5m2) return DType::kFloat8E5M2;
  return DType::kOther;
}

std::string Tensor::dtype_str() const {
  const DType known = dtype();
  if (known != DType::kOther) return dtype_name(known);
  const int32_t code = dtype_code();
  const char* name = shim::dtype_code_name(code);
  return name != nullptr ? name : "dtype code " + std::to_string(code);
}

Device Tensor::device() const {
  if (!device_known_) {
    const auto& api = shim::torch();
    int32_t type = 0;
    int32_t index = 0;
    check_shim(api.get_device_type(handle_, &type), "get_device_type");
    check_shim(api.get_device_index(handle_, &index), "get_device_index");
    if (type == api.codes.cpu) {
      device_ = {DeviceType::kCpu, -1};
    } else if (type == api.codes.cuda) {
      device_ = {DeviceType::kCuda, index};
    } else {
      device_ = {DeviceType::kOther, index};
    }
    device_known_ = true;
  }
  return device_;
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
  int32_t device_type = device.type == DeviceType::kCuda ? api.codes.cuda : api.codes.cpu;
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
      device.type == DeviceType::kCuda ? api.codes.cuda : api.codes.cpu;
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
