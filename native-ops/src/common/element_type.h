// The floating storage types every kernel family takes. Kernel parameter structs use this enum;
// they know nothing of PyTorch.
#pragma once

#include <cstdint>

namespace djl_attn {

enum class ElementType { kFloat32, kFloat16, kBFloat16 };

// Bytes per element.
constexpr int64_t element_size(ElementType type) { return type == ElementType::kFloat32 ? 4 : 2; }

}  // namespace djl_attn
