#include "common/check.h"

#include <cmath>
#include <limits>

#include "common/error.h"

namespace djl_attn {

std::string ArgName::prefix() const { return std::string(op) + ": " + arg; }

void check_dim(const Tensor& t, ArgName name, int64_t expected, const char* layout) {
  int64_t dim = t.dim();
  if (dim != expected) {
    fail_invalid(name.prefix(), ": expected ", expected, " dims ", layout, ", got ", dim,
                 " dims with shape ", shape_str(t.sizes()));
  }
}

void check_size(const Tensor& t, ArgName name, int64_t d, const char* dim_name, int64_t expected,
                const char* expected_from) {
  int64_t got = t.size(d);
  if (got != expected) {
    fail_invalid(name.prefix(), ": expected size ", expected, " for ", dim_name, " (", expected_from,
                 "), got ", got, " in shape ", shape_str(t.sizes()));
  }
}

const DType kKernelDTypes[3] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

void check_kernel_dtype(const Tensor& t, ArgName name) {
  check_dtype_in(t, name, {kKernelDTypes[0], kKernelDTypes[1], kKernelDTypes[2]});
}

void check_dtype_in(const Tensor& t, ArgName name, std::initializer_list<DType> allowed) {
  DType dtype = t.dtype();
  for (DType a : allowed) {
    if (a == dtype) return;
  }
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  fail_invalid(name.prefix(), ": expected dtype in {", list, "}, got ", t.dtype_str());
}

void check_dtype(const Tensor& t, ArgName name, DType expected) {
  DType dtype = t.dtype();
  if (dtype != expected) {
    fail_invalid(name.prefix(), ": expected dtype ", dtype_name(expected), ", got ",
                 t.dtype_str());
  }
}

void check_same_dtype(const Tensor& t, ArgName name, const Tensor& ref, ArgName ref_name) {
  if (t.dtype() != ref.dtype()) {
    fail_invalid(name.prefix(), ": expected the dtype of ", ref_name.arg, " (",
                 ref.dtype_str(), "), got ", t.dtype_str());
  }
}

void check_same_device(const Tensor& t, ArgName name, const Tensor& ref, ArgName ref_name) {
  Device device = t.device();
  Device expected = ref.device();
  if (device != expected) {
    fail_invalid(name.prefix(), ": expected the device of ", ref_name.arg, " (", expected.str(),
                 "), got ", device.str());
  }
}

void check_supported_device(const Tensor& t, ArgName name) {
  if (t.device().type == DeviceType::kOther) {
    fail_invalid(name.prefix(), ": expected a cpu or cuda tensor, got ", t.device().str());
  }
}

void check_last_dim_contiguous(const Tensor& t, ArgName name) {
  if (t.size(-1) > 1 && t.stride(-1) != 1) {
    fail_invalid(name.prefix(), ": expected a contiguous last dim (stride 1), got stride ",
                 t.stride(-1));
  }
}

void check_contiguous(const Tensor& t, ArgName name) {
  std::vector<int64_t> sizes = t.sizes();
  // An empty tensor holds no element to misplace, whatever strides PyTorch gave it.
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] > 1 && t.stride(static_cast<int64_t>(i)) != expected) {
      fail_invalid(name.prefix(), ": expected a contiguous tensor, got stride ",
                   t.stride(static_cast<int64_t>(i)), " at dim ", i, " of shape ",
                   shape_str(sizes));
    }
    expected *= sizes[i];
  }
}

StreamShape check_stream(const Tensor& hidden, ArgName name) {
  check_dim(hidden, name, 2, "[T, C]");
  check_kernel_dtype(hidden, name);
  check_supported_device(hidden, name);
  check_contiguous(hidden, name);
  return {hidden.size(0), hidden.size(1)};
}

void check_window_size(ArgName name, int64_t size) {
  if (size < -1) {
    fail_invalid(name.prefix(), ": expected -1 (unbounded) or a value >= 0, got ", size);
  }
}

void check_qk_scale(const char* op, double scale) {
  if (!std::isfinite(scale)) fail_invalid(op, ": scale: expected a finite value, got ", scale);
  if (!std::isfinite(static_cast<float>(scale))) {
    fail_invalid(op, ": scale: expected a finite value (as float32), got ", scale);
  }
}

float checked_softcap(const char* op, double softcap) {
  if (!std::isfinite(softcap) || softcap < 0.0) {
    fail_invalid(op, ": softcap: expected a finite value >= 0 (0: none), got ", softcap);
  }
  const float as_float = static_cast<float>(softcap);
  if (softcap != 0.0 &&
      (!std::isfinite(as_float) || as_float < std::numeric_limits<float>::min())) {
    fail_invalid(op, ": softcap: expected 0 (none) or a value float32 holds as a normal ",
                 "number, in [", std::numeric_limits<float>::min(), ", ",
                 std::numeric_limits<float>::max(), "], got ", softcap);
  }
  return as_float;
}

std::string list_str(const int* values, size_t count) {
  std::string out = "{";
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "}";
}

std::string csv_str(const int* values, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ",";
    out += std::to_string(values[i]);
  }
  return out;
}

}  // namespace djl_attn
