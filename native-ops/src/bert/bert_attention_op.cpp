#include "bert/bert_attention_op.h"

#include <cmath>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::bert {
namespace {

constexpr const char* kOp = "bert_attention";

void check_kv_lens(const Tensor& kv_lens, const Tensor& qkv, const flash::FlashBackend& flash) {
  const ArgName name{kOp, "kv_lens"};
  check_dim(kv_lens, name, 1, "[B]");
  check_size(kv_lens, name, 0, "B", qkv.size(0), "the batch of qkv");
  check_dtype(kv_lens, name, DType::kInt32);
  check_same_device(kv_lens, name, qkv, {kOp, "qkv"});
  check_contiguous(kv_lens, name);
  const int64_t batch = kv_lens.size(0), seqlen = qkv.size(1);
  if (batch == 0) return;
  std::vector<int32_t> values(batch);
  if (flash.copy_to_host != nullptr) {
    flash.copy_to_host(values.data(), kv_lens.data(), values.size() * sizeof(int32_t));
  } else {
    const int32_t* src = kv_lens.data_as<int32_t>();
    values.assign(src, src + batch);
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (values[b] < 0 || values[b] > seqlen) {
      fail_invalid(name.prefix(), ": expected values in [0, S = ", seqlen, "], got ", values[b],
                   " at index ", b);
    }
  }
}

}  // namespace

void bert_attention_boxed(shim::StableIValue* stack, const flash::FlashBackend& flash) {
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor qkv = take_tensor(stack, 0);
  std::optional<Tensor> qkv_bias = take_optional_tensor(stack, 1);
  std::optional<Tensor> kv_lens = take_optional_tensor(stack, 2);
  const int64_t heads = read_int(stack, 3);
  const double scale = read_float(stack, 4);

  const ArgName qkv_name{kOp, "qkv"}, bias_name{kOp, "qkv_bias"};
  check_dim(qkv, qkv_name, 3, "[B, S, 3 * H * D]");
  const int64_t batch = qkv.size(0), seqlen = qkv.size(1), width = qkv.size(2);
  if (seqlen > flash::kMaxSeqLen) {
    fail_invalid(qkv_name.prefix(), ": expected S <= 2^30, got ", seqlen);
  }
  if (heads < 1) fail_invalid(kOp, ": num_heads: expected a value >= 1, got ", heads);
  // Divided in two steps: 3 * num_heads may overflow for absurd values.
  if (width % 3 != 0 || (width / 3) % heads != 0) {
    fail_invalid(qkv_name.prefix(), ": expected a last dim 3 * H * D divisible by 3 * num_heads",
                 " (num_heads = ", heads, "), got ", width);
  }
  const int64_t dim = width / (3 * heads);
  if (dim < 1 || dim > flash::kMaxHeadDim) {
    fail_invalid(qkv_name.prefix(), ": expected a head dim D = last dim / (3 * num_heads) in [1, ",
                 flash::kMaxHeadDim, "], got ", dim);
  }
  check_kernel_dtype(qkv, qkv_name);
  check_supported_device(qkv, qkv_name);
  check_last_dim_contiguous(qkv, qkv_name);
  if (qkv_bias) {
    check_dim(*qkv_bias, bias_name, 1, "[3 * H * D]");
    check_size(*qkv_bias, bias_name, 0, "3 * H * D", width, "the last dim of qkv");
    // The flash kernels add the bias on load in the dtype of q.
    check_same_dtype(*qkv_bias, bias_name, qkv, qkv_name);
    check_same_device(*qkv_bias, bias_name, qkv, qkv_name);
    check_contiguous(*qkv_bias, bias_name);
  }
  flash::check_query_tiles(qkv_name, batch, seqlen, heads);
  if (!std::isfinite(scale)) fail_invalid(kOp, ": scale: expected a finite value, got ", scale);
  if (kv_lens) check_kv_lens(*kv_lens, qkv, flash);

  const Device device = qkv.device();
  const int64_t hidden = heads * dim;
  Tensor out = Tensor::empty({batch, seqlen, hidden}, qkv.dtype(), device);
  if (batch > 0 && seqlen > 0) {
    // The kernels always write the logsumexp; bert_attention does not return it.
    Tensor lse = Tensor::empty({batch, heads, seqlen}, DType::kFloat32, device);
    const int64_t element_size = qkv.dtype() == DType::kFloat32 ? 4 : 2;
    const char* base = static_cast<const char*>(qkv.data());
    // q | k | v side by side in the last dim, each head-major [H, D].
    auto operand = [&](int64_t part) {
      return flash::FlashOperand{base + part * hidden * element_size, qkv.stride(0), qkv.stride(1),
                                 dim};
    };
    // Padding keys are masked through kv_lens; queries at padding positions are still computed
    // (they see the valid keys), as stock DJL computes them. out [B, S, H * D] is the contiguous
    // [B, S, H, D] the kernels write.
    flash::FlashParams p =
        flash::flash_params(operand(0), operand(1), operand(2), out.data(), lse.data_as<float>(),
                            batch, seqlen, seqlen, heads, heads, dim, static_cast<float>(scale),
                            /*causal=*/false, element_type(qkv.dtype()));
    p.kv_lens = kv_lens ? kv_lens->data_as<int32_t>() : nullptr;
    if (qkv_bias) {
      const char* bias = static_cast<const char*>(qkv_bias->data());
      p.q_bias = bias;
      p.k_bias = bias + hidden * element_size;
      p.v_bias = bias + 2 * hidden * element_size;
    }
    flash.launch(p);
  }
  put_tensor(stack, 0, std::move(out));
}

}  // namespace djl_attn::bert
