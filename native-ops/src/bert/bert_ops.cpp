#include "bert/bert_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::bert {
namespace {


int64_t element_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

// An activation: [..., C], a floating dtype, contiguous. Returns (rows, C).
struct RowShape {
  int64_t rows;
  int64_t channels;
};

RowShape check_activation(const Tensor& x, ArgName name, bool need_channels) {
  if (x.dim() < 1) {
    fail_invalid(name.prefix(), ": expected at least 1 dim [..., C], got 0 dims");
  }
  check_kernel_dtype(x, name);
  check_supported_device(x, name);
  // An empty tensor may carry any strides (torch gives [3, 0] strides (1, 1)); nothing is read.
  if (x.numel() > 0) check_contiguous(x, name);
  const int64_t channels = x.size(-1);
  if (need_channels && channels < 1) {
    fail_invalid(name.prefix(), ": expected a last dim C >= 1, got 0 in shape ",
                 shape_str(x.sizes()));
  }
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return {rows, channels};
}

// The residual: x's shape, dtype and device, contiguous.
void check_residual(const Tensor& residual, ArgName name, const Tensor& x, ArgName x_name) {
  if (residual.sizes() != x.sizes()) {
    fail_invalid(name.prefix(), ": expected the shape of ", x_name.arg, " ", shape_str(x.sizes()),
                 ", got ", shape_str(residual.sizes()));
  }
  check_same_dtype(residual, name, x, x_name);
  check_same_device(residual, name, x, x_name);
  check_contiguous(residual, name);
}

// A per-channel vector: [C], contiguous, on x's device, dtype x's or float32 (float32 parameters
// with float16/bfloat16 activations are what mixed-precision checkpoints hold). All parameter
// vectors of one call share a dtype: `first` names the one whose dtype the others must match.
void check_param(const Tensor& p, ArgName name, const Tensor& x, ArgName x_name, int64_t channels,
                 const Tensor* first, ArgName first_name) {
  check_dim(p, name, 1, "[C]");
  check_size(p, name, 0, "C", channels, "the last dim of x");
  if (first == nullptr) {
    if (p.dtype() != x.dtype() && p.dtype() != DType::kFloat32) {
      fail_invalid(name.prefix(), ": expected dtype ", x.dtype_str(), " (the dtype of ",
                   x_name.arg, ") or float32, got ", p.dtype_str());
    }
  } else {
    check_same_dtype(p, name, *first, first_name);
  }
  check_same_device(p, name, x, x_name);
  check_contiguous(p, name);
}

const void* data_or_null(const std::optional<Tensor>& t) { return t ? t->data() : nullptr; }


// The parameters both padding kernels take: `padded` [B, S, C] and `packed` [total, C]
// contiguous, `cu_seqlens` int32 [B + 1] on their device.
PaddingParams padding_params(const Tensor& padded, const Tensor& packed, const Tensor& cu_seqlens,
                             int64_t batch, int64_t seqlen, int64_t channels, int64_t total) {
  PaddingParams p{};
  p.padded = padded.data();
  p.packed = packed.data();
  p.cu_seqlens = cu_seqlens.data_as<int32_t>();
  p.padded_batch_stride = seqlen * channels;
  p.padded_seq_stride = channels;
  p.batch = batch;
  p.seqlen = seqlen;
  p.channels = channels;
  p.total = total;
  p.element_size = element_size(packed.dtype());
  return p;
}

// cu_seqlens of restore_padding: starts at 0, lengths in [0, seqlen], ends at `total`.
void check_restore_offsets(const Tensor& cu_seqlens, int64_t batch, int64_t seqlen, int64_t total,
                           const BertBackend& backend) {
  const ArgName cu_name{"restore_padding", "cu_seqlens"};
  const std::vector<int32_t> cu = read_int32(cu_seqlens, batch + 1, backend.copy_to_host);
  if (cu[0] != 0) fail_invalid(cu_name.prefix(), ": expected 0 at index 0, got ", cu[0]);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = int64_t{cu[b + 1]} - cu[b];
    if (len < 0 || len > seqlen) {
      fail_invalid(cu_name.prefix(), ": expected lengths cu_seqlens[b + 1] - cu_seqlens[b] in [0, ",
                   "seqlen = ", seqlen, "], got ", len, " at b = ", b);
    }
  }
  if (cu[batch] != total) {
    fail_invalid(cu_name.prefix(), ": expected a last value equal to the tokens of packed (",
                 total, "), got ", cu[batch]);
  }
}

}  // namespace

void add_bias_residual_layernorm_boxed(shim::StableIValue* stack, const BertBackend& backend) {
  constexpr const char* kOp = "add_bias_residual_layernorm";
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor x = take_tensor(stack, 0);
  std::optional<Tensor> bias = take_optional_tensor(stack, 1);
  Tensor residual = take_tensor(stack, 2);
  Tensor gamma = take_tensor(stack, 3);
  Tensor beta = take_tensor(stack, 4);
  const double eps = read_float(stack, 5);

  const ArgName x_name{kOp, "x"}, gamma_name{kOp, "gamma"};
  const RowShape shape = check_activation(x, x_name, /*need_channels=*/true);
  check_residual(residual, {kOp, "residual"}, x, x_name);
  check_param(gamma, gamma_name, x, x_name, shape.channels, nullptr, gamma_name);
  check_param(beta, {kOp, "beta"}, x, x_name, shape.channels, &gamma, gamma_name);
  if (bias) check_param(*bias, {kOp, "bias"}, x, x_name, shape.channels, &gamma, gamma_name);
  if (!std::isfinite(eps) || eps < 0) {
    fail_invalid(kOp, ": eps: expected a finite value >= 0, got ", eps);
  }

  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (shape.rows > 0) {
    LayerNormParams p{};
    p.x = x.data();
    p.bias = data_or_null(bias);
    p.residual = residual.data();
    p.gamma = gamma.data();
    p.beta = beta.data();
    p.out = out.data();
    p.rows = shape.rows;
    p.channels = shape.channels;
    p.eps = static_cast<float>(eps);
    p.dtype = element_type(x.dtype());
    p.param_dtype = element_type(gamma.dtype());
    backend.layernorm(p);
  }
  put_tensor(stack, 0, std::move(out));
}

void add_bias_gelu_boxed(shim::StableIValue* stack, const BertBackend& backend) {
  constexpr const char* kOp = "add_bias_gelu";
  Tensor x = take_tensor(stack, 0);
  std::optional<Tensor> bias = take_optional_tensor(stack, 1);
  const bool tanh_approximation = read_bool(stack, 2);

  const ArgName x_name{kOp, "x"}, bias_name{kOp, "bias"};
  const RowShape shape = check_activation(x, x_name, /*need_channels=*/false);
  if (bias) check_param(*bias, bias_name, x, x_name, shape.channels, nullptr, bias_name);

  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (shape.rows > 0 && shape.channels > 0) {
    ElementwiseParams p{};
    p.x = x.data();
    p.bias = data_or_null(bias);
    p.out = out.data();
    p.rows = shape.rows;
    p.channels = shape.channels;
    p.epilogue = tanh_approximation ? Epilogue::kGeluTanh : Epilogue::kGeluErf;
    p.dtype = element_type(x.dtype());
    p.param_dtype = bias ? element_type(bias->dtype()) : p.dtype;
    backend.elementwise(p);
  }
  put_tensor(stack, 0, std::move(out));
}

void add_bias_residual_affine_boxed(shim::StableIValue* stack, const BertBackend& backend) {
  constexpr const char* kOp = "add_bias_residual_affine";
  Tensor x = take_tensor(stack, 0);
  std::optional<Tensor> bias = take_optional_tensor(stack, 1);
  Tensor residual = take_tensor(stack, 2);
  Tensor scale = take_tensor(stack, 3);
  Tensor shift = take_tensor(stack, 4);

  const ArgName x_name{kOp, "x"}, scale_name{kOp, "scale"};
  const RowShape shape = check_activation(x, x_name, /*need_channels=*/false);
  check_residual(residual, {kOp, "residual"}, x, x_name);
  check_param(scale, scale_name, x, x_name, shape.channels, nullptr, scale_name);
  check_param(shift, {kOp, "shift"}, x, x_name, shape.channels, &scale, scale_name);
  if (bias) check_param(*bias, {kOp, "bias"}, x, x_name, shape.channels, &scale, scale_name);

  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (shape.rows > 0 && shape.channels > 0) {
    ElementwiseParams p{};
    p.x = x.data();
    p.bias = data_or_null(bias);
    p.residual = residual.data();
    p.scale = scale.data();
    p.shift = shift.data();
    p.out = out.data();
    p.rows = shape.rows;
    p.channels = shape.channels;
    p.epilogue = Epilogue::kAffine;
    p.dtype = element_type(x.dtype());
    p.param_dtype = element_type(scale.dtype());
    backend.elementwise(p);
  }
  put_tensor(stack, 0, std::move(out));
}

void remove_padding_boxed(shim::StableIValue* stack, const BertBackend& backend) {
  constexpr const char* kOp = "remove_padding";
  Tensor x = take_tensor(stack, 0);
  Tensor lens = take_tensor(stack, 1);

  const ArgName x_name{kOp, "x"}, lens_name{kOp, "lens"};
  check_dim(x, x_name, 3, "[B, S, C]");
  check_kernel_dtype(x, x_name);
  check_supported_device(x, x_name);
  check_contiguous(x, x_name);
  const int64_t batch = x.size(0), seqlen = x.size(1), channels = x.size(2);
  check_dim(lens, lens_name, 1, "[B]");
  check_size(lens, lens_name, 0, "B", batch, "the batch of x");
  check_dtype(lens, lens_name, DType::kInt32);
  check_same_device(lens, lens_name, x, x_name);
  check_contiguous(lens, lens_name);
  const std::vector<int32_t> values = read_int32(lens, batch, backend.copy_to_host);
  // The prefix sums are int32 (what flash_attention_varlen takes), so the total must fit.
  std::vector<int32_t> cu(batch + 1, 0);
  int64_t total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (values[b] < 0 || values[b] > seqlen) {
      fail_invalid(lens_name.prefix(), ": expected values in [0, S = ", seqlen, "], got ",
                   values[b], " at index ", b);
    }
    total += values[b];
    if (total > INT32_MAX) {
      fail_invalid(lens_name.prefix(), ": expected a sum of at most 2^31 - 1 tokens, got ", total,
                   " after index ", b);
    }
    cu[b + 1] = static_cast<int32_t>(total);
  }

  Tensor packed = Tensor::empty({total, channels}, x.dtype(), x.device());
  Tensor cu_seqlens = Tensor::empty({batch + 1}, DType::kInt32, x.device());
  if (backend.copy_from_host != nullptr) {
    backend.copy_from_host(cu_seqlens.data(), cu.data(), cu.size() * sizeof(int32_t));
  } else {
    std::copy(cu.begin(), cu.end(), cu_seqlens.data_as<int32_t>());
  }
  if (total > 0 && channels > 0) {
    backend.remove_padding(
        padding_params(x, packed, cu_seqlens, batch, seqlen, channels, total));
  }
  put_tensor(stack, 0, std::move(packed));
  put_tensor(stack, 1, std::move(cu_seqlens));
}

void restore_padding_boxed(shim::StableIValue* stack, const BertBackend& backend) {
  constexpr const char* kOp = "restore_padding";
  Tensor packed = take_tensor(stack, 0);
  Tensor cu_seqlens = take_tensor(stack, 1);
  const int64_t seqlen = read_int(stack, 2);

  const ArgName packed_name{kOp, "packed"}, cu_name{kOp, "cu_seqlens"};
  check_dim(packed, packed_name, 2, "[total, C]");
  check_kernel_dtype(packed, packed_name);
  check_supported_device(packed, packed_name);
  check_contiguous(packed, packed_name);
  const int64_t total = packed.size(0), channels = packed.size(1);
  check_dim(cu_seqlens, cu_name, 1, "[B + 1]");
  if (cu_seqlens.size(0) < 1) {
    fail_invalid(cu_name.prefix(), ": expected at least 1 element [B + 1], got 0");
  }
  check_dtype(cu_seqlens, cu_name, DType::kInt32);
  check_same_device(cu_seqlens, cu_name, packed, packed_name);
  check_contiguous(cu_seqlens, cu_name);
  if (seqlen < 0) fail_invalid(kOp, ": seqlen: expected a value >= 0, got ", seqlen);
  const int64_t batch = cu_seqlens.size(0) - 1;
  check_restore_offsets(cu_seqlens, batch, seqlen, total, backend);

  Tensor out = Tensor::empty({batch, seqlen, channels}, packed.dtype(), packed.device());
  if (batch > 0 && seqlen > 0 && channels > 0) {
    backend.restore_padding(
        padding_params(out, packed, cu_seqlens, batch, seqlen, channels, total));
  }
  put_tensor(stack, 0, std::move(out));
}

}  // namespace djl_attn::bert
