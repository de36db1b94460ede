// Argument checks shared by every operator binding. Each failure throws InvalidArgument with a
// message of the form "<op>: <argument>: expected <rule>, got <value>".
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>

#include "common/tensor.h"

namespace djl_attn {

// Names the operator and argument in messages: ArgName{"flash_attention", "q"}.
struct ArgName {
  const char* op;
  const char* arg;
  std::string prefix() const;  // "flash_attention: q"
};

// `layout` describes the expected dims, e.g. "[B, Sq, Hq, D]".
void check_dim(const Tensor& t, ArgName name, int64_t expected, const char* layout);
void check_size(const Tensor& t, ArgName name, int64_t d, const char* dim_name, int64_t expected,
                const char* expected_from);
void check_dtype_in(const Tensor& t, ArgName name, std::initializer_list<DType> allowed);
void check_dtype(const Tensor& t, ArgName name, DType expected);

// The floating dtypes every kernel family takes (float32, float16, bfloat16): the one list, also
// exported as "<family>.dtypes" by djl_attn_supported_values.
extern const DType kKernelDTypes[3];
void check_kernel_dtype(const Tensor& t, ArgName name);
void check_same_dtype(const Tensor& t, ArgName name, const Tensor& ref, ArgName ref_name);
void check_same_device(const Tensor& t, ArgName name, const Tensor& ref, ArgName ref_name);
void check_supported_device(const Tensor& t, ArgName name);
void check_last_dim_contiguous(const Tensor& t, ArgName name);
void check_contiguous(const Tensor& t, ArgName name);

// The residual stream of the layer and step operators (encoder_layer, decoder_layer,
// embed_tokens, decoder_head): [T, C], a kernel dtype, on a supported device, contiguous.
struct StreamShape {
  int64_t tokens;       // T
  int64_t hidden_size;  // C
};
StreamShape check_stream(const Tensor& hidden, ArgName name);

// The attention features flash_attention and the paged operators share. A window size is -1
// (unbounded) or >= 0. A soft-cap is 0 (none) or a float32 the kernels can divide by: the double
// the schema carries must stay finite and normal once rounded to float (1e39 would become inf and
// every score NaN; 1e-46 would become 0 and silently turn the cap off). Returns the float.
void check_window_size(ArgName name, int64_t size);
// The factor on q.k: finite, also once rounded to the float32 the kernels use.
void check_qk_scale(const char* op, double scale);
float checked_softcap(const char* op, double softcap);

// "{64, 80, 96}": a supported-values list as messages print it.
std::string list_str(const int* values, size_t count);
template <size_t N>
std::string list_str(const int (&values)[N]) {
  return list_str(values, N);
}

// "64,80,96": the same list as djl_attn_supported_values returns it.
std::string csv_str(const int* values, size_t count);
template <size_t N>
std::string csv_str(const int (&values)[N]) {
  return csv_str(values, N);
}

}  // namespace djl_attn
