// The floating storage types every kernel family takes. Kernel parameter structs use this enum;
// they know nothing of PyTorch.
#pragma once

namespace djl_attn {

enum class ElementType { kFloat32, kFloat16, kBFloat16 };

}  // namespace djl_attn
