#include "common/binding.h"

#include "common/error.h"

namespace djl_attn {

ElementType element_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ElementType::kFloat32;
    case DType::kFloat16: return ElementType::kFloat16;
    case DType::kBFloat16: return ElementType::kBFloat16;
    default: break;
  }
  fail_native("element_type: ", dtype_name(dtype), " is not a floating type the kernels take");
}

std::vector<int32_t> read_int32(const Tensor& t, int64_t count, CopyToHost copy_to_host) {
  std::vector<int32_t> values(count);
  if (count == 0) return values;
  if (copy_to_host != nullptr) {
    copy_to_host(values.data(), t.data(), values.size() * sizeof(int32_t));
  } else {
    const int32_t* src = t.data_as<int32_t>();
    values.assign(src, src + count);
  }
  return values;
}

}  // namespace djl_attn
