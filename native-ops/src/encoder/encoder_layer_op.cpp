#include "encoder/encoder_layer_op.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"
#include "flash/flash_params.h"

namespace djl_attn::encoder {
namespace {

constexpr const char* kOp = "encoder_layer";

// A float32 vector parameter [n] (biases, norm weights).
const float* check_vector(const Tensor& t, const char* arg, int64_t n, const char* n_from,
                          const Tensor& hidden) {
  const ArgName name{kOp, arg};
  check_dim(t, name, 1, "[n]");
  check_size(t, name, 0, "n", n, n_from);
  check_dtype(t, name, DType::kFloat32);
  check_same_device(t, name, hidden, {kOp, "hidden"});
  check_contiguous(t, name);
  return t.data_as<float>();
}

// A projection's weight: [out, in] in hidden's dtype, or a gemm_pack_weight blob of one (float32
// hidden only). `out` < 0: taken from the weight (the intermediate size).
gemm::Weight check_weight(const Tensor& t, const char* arg, int64_t out, const char* out_from,
                          int64_t in, const char* in_from, const Tensor& hidden) {
  const ArgName name{kOp, arg};
  check_same_device(t, name, hidden, {kOp, "hidden"});
  if (t.dtype() == DType::kUInt8) {
    check_dim(t, name, 1, "[bytes] (a gemm_pack_weight result)");
    check_contiguous(t, name);
    if (t.device().type != DeviceType::kCpu) {  // its header is read below, on the host
      fail_invalid(name.prefix(), ": expected a cpu tensor (packed weights serve the CPU GEMMs), "
                   "got ", t.device().str());
    }
    if (hidden.dtype() != DType::kFloat32) {
      fail_invalid(name.prefix(), ": expected a [out, in] weight of hidden's dtype ",
                   hidden.dtype_str(), " (packed weights need a float32 hidden), got a packed "
                   "weight");
    }
    gemm::Weight w{};
    std::string why;
    if (!gemm::read_packed(t.data(), t.numel(), &w, &why)) {
      fail_invalid(name.prefix(), ": expected a gemm_pack_weight result, got ", why);
    }
    if ((out >= 0 && w.n != out) || w.k != in) {
      fail_invalid(name.prefix(), ": expected a packed weight of [", out >= 0 ? out : w.n, ", ",
                   in, "] (", out >= 0 ? out_from : "out", ", ", in_from, "), got one of [", w.n,
                   ", ", w.k, "]");
    }
    return w;
  }
  check_dim(t, name, 2, "[out, in]");
  if (out >= 0) check_size(t, name, 0, "out", out, out_from);
  check_size(t, name, 1, "in", in, in_from);
  check_same_dtype(t, name, hidden, {kOp, "hidden"});
  check_contiguous(t, name);
  if (t.size(0) < 1) fail_invalid(name.prefix(), ": expected out >= 1, got 0");
  return {gemm::WeightFormat::kPlain, t.data(), t.size(0), in};
}

// cu_seqlens [B + 1]: 0, non-decreasing, ending at T, each length <= max_seqlen.
void check_cu_seqlens(const Tensor& cu, int64_t tokens, int64_t max_seqlen) {
  const ArgName name{kOp, "cu_seqlens"};
  const int64_t b = cu.size(0) - 1;
  const int32_t* v = cu.data_as<int32_t>();
  if (v[0] != 0) fail_invalid(name.prefix(), ": expected 0 at index 0, got ", v[0]);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t len = int64_t{v[i + 1]} - v[i];
    if (len < 0) {
      fail_invalid(name.prefix(), ": expected non-decreasing values, got ", v[i + 1],
                   " after ", v[i], " at index ", i + 1);
    }
    if (len > max_seqlen) {
      fail_invalid(kOp, ": max_seqlen: expected >= every sequence's length, got ", max_seqlen,
                   " but sequence ", i, " has ", len, " tokens");
    }
  }
  if (v[b] != tokens) {
    fail_invalid(name.prefix(), ": expected the last value to be T = ", tokens,
                 " (the rows of hidden), got ", v[b]);
  }
}

}  // namespace

void encoder_layer_boxed(shim::StableIValue* stack, const EncoderBackend& backend) {
  Tensor hidden = take_tensor(stack, 0);
  Tensor cu_seqlens = take_tensor(stack, 1);
  const int64_t max_seqlen = read_int(stack, 2);
  Tensor qkv_weight = take_tensor(stack, 3);
  Tensor qkv_bias = take_tensor(stack, 4);
  Tensor out_weight = take_tensor(stack, 5);
  Tensor out_bias = take_tensor(stack, 6);
  Tensor attn_norm_weight = take_tensor(stack, 7);
  Tensor attn_norm_bias = take_tensor(stack, 8);
  Tensor up_weight = take_tensor(stack, 9);
  Tensor up_bias = take_tensor(stack, 10);
  Tensor down_weight = take_tensor(stack, 11);
  Tensor down_bias = take_tensor(stack, 12);
  Tensor ffn_norm_weight = take_tensor(stack, 13);
  Tensor ffn_norm_bias = take_tensor(stack, 14);
  const int64_t num_heads = read_int(stack, 15);
  const double norm_eps = read_float(stack, 16);
  const double scale = read_float(stack, 17);
  const bool gelu_tanh = read_bool(stack, 18);

  // The stream: [T, C], contiguous, of a kernel dtype, on a device with a kernel.
  const ArgName hn{kOp, "hidden"};
  const auto [tokens, c] = check_stream(hidden, hn);
  if (num_heads < 1 || c % num_heads != 0) {
    fail_invalid(kOp, ": num_heads: expected a value >= 1 dividing the hidden size C = ", c,
                 ", got ", num_heads);
  }
  const int64_t dim = c / num_heads;
  if (dim < 1 || dim > flash::kMaxHeadDim) {
    fail_invalid(kOp, ": num_heads: expected a head dim C / num_heads in [1, ",
                 flash::kMaxHeadDim, "], got ", dim, " (C = ", c, ", num_heads = ", num_heads,
                 ")");
  }
  if (!std::isfinite(norm_eps) || norm_eps < 0) {
    fail_invalid(kOp, ": norm_eps: expected a finite value >= 0, got ", norm_eps);
  }
  check_qk_scale(kOp, scale);

  // The batch.
  const ArgName cn{kOp, "cu_seqlens"};
  check_dim(cu_seqlens, cn, 1, "[B + 1]");
  if (cu_seqlens.size(0) < 1) fail_invalid(cn.prefix(), ": expected at least 1 element [B + 1], got 0");
  check_dtype(cu_seqlens, cn, DType::kInt32);
  check_same_device(cu_seqlens, cn, hidden, hn);
  check_contiguous(cu_seqlens, cn);
  if (max_seqlen < 0 || max_seqlen > flash::kMaxSeqLen) {
    fail_invalid(kOp, ": max_seqlen: expected a value in [0, 2^30], got ", max_seqlen);
  }
  if (tokens > INT32_MAX) {
    fail_invalid(hn.prefix(), ": expected at most 2^31 - 1 tokens, got ", tokens);
  }

  // The weights.
  constexpr const char* kC = "the hidden size C of hidden";
  const gemm::Weight qkv =
      check_weight(qkv_weight, "qkv_weight", 3 * c, "3 C", c, kC, hidden);
  const gemm::Weight out = check_weight(out_weight, "out_weight", c, kC, c, kC, hidden);
  const gemm::Weight up = check_weight(up_weight, "up_weight", -1, "", c, kC, hidden);
  const int64_t inter = up.n;
  constexpr const char* kI = "the intermediate size I, up_weight's out";
  const gemm::Weight down = check_weight(down_weight, "down_weight", c, kC, inter, kI, hidden);

  EncoderLayerParams p{};
  p.qkv_bias = check_vector(qkv_bias, "qkv_bias", 3 * c, "3 C", hidden);
  p.out_bias = check_vector(out_bias, "out_bias", c, kC, hidden);
  p.attn_norm_weight = check_vector(attn_norm_weight, "attn_norm_weight", c, kC, hidden);
  p.attn_norm_bias = check_vector(attn_norm_bias, "attn_norm_bias", c, kC, hidden);
  p.up_bias = check_vector(up_bias, "up_bias", inter, kI, hidden);
  p.down_bias = check_vector(down_bias, "down_bias", c, kC, hidden);
  p.ffn_norm_weight = check_vector(ffn_norm_weight, "ffn_norm_weight", c, kC, hidden);
  p.ffn_norm_bias = check_vector(ffn_norm_bias, "ffn_norm_bias", c, kC, hidden);
  // A device without a kernel is named only now: a call that mixes devices reaches the kernel of
  // its highest device (the dispatcher's choice), and the argument on the other device is the
  // one to name, by the device checks above.
  if (backend.run == nullptr) {
    fail_invalid(hn.prefix(), ": expected a tensor on a device with an encoder_layer kernel "
                 "(CPU; on CUDA the encoder runs op by op), got ", hidden.device().str());
  }
  // The values: host memory (the only device with a kernel), so reading them costs no sync.
  check_cu_seqlens(cu_seqlens, tokens, max_seqlen);
  if (tokens == 0) return;

  p.hidden = hidden.data();
  p.cu_seqlens = cu_seqlens.data_as<int32_t>();
  p.batch = cu_seqlens.size(0) - 1;
  p.max_seqlen = max_seqlen;
  p.qkv = qkv;
  p.out = out;
  p.up = up;
  p.down = down;
  p.tokens = tokens;
  p.hidden_size = c;
  p.heads = num_heads;
  p.head_dim = dim;
  p.intermediate = inter;
  p.norm_eps = static_cast<float>(norm_eps);
  p.scale = static_cast<float>(scale);
  p.gelu_tanh = gelu_tanh;
  p.dtype = element_type(hidden.dtype());
  backend.run(p);
}

void gemm_pack_weight_boxed(shim::StableIValue* stack, const EncoderBackend& backend) {
  constexpr const char* kPackOp = "gemm_pack_weight";
  Tensor weight = take_tensor(stack, 0);
  const int64_t mode = read_int(stack, 1);
  const ArgName wn{kPackOp, "weight"};
  check_dim(weight, wn, 2, "[out, in]");
  check_dtype(weight, wn, DType::kFloat32);
  check_supported_device(weight, wn);
  check_contiguous(weight, wn);
  if (!backend.packs) {
    fail_invalid(wn.prefix(), ": expected a cpu tensor (packed weights serve the CPU GEMMs), got ",
                 weight.device().str());
  }
  const int64_t n = weight.size(0), k = weight.size(1);
  if (n < 1 || k < 1) {
    fail_invalid(wn.prefix(), ": expected out >= 1 and in >= 1, got shape ",
                 shape_str(weight.sizes()));
  }
  gemm::WeightFormat format;
  switch (static_cast<gemm::PackMode>(mode)) {
    case gemm::PackMode::kFloat32: format = gemm::float32_pack_format(); break;
    case gemm::PackMode::kBFloat16: format = gemm::WeightFormat::kBFloat16; break;
    case gemm::PackMode::kInt8:
      if (!gemm::int8_available()) {
        fail_invalid(kPackOp, ": mode: int8 needs libtorch's _int_mm (aoti_torch_cpu__int_mm_out),"
                     " which this libtorch does not export");
      }
      format = gemm::WeightFormat::kInt8;
      break;
    default:
      fail_invalid(kPackOp, ": mode: expected 0 (float32), 1 (bfloat16) or 2 (int8), got ", mode);
  }
  Tensor blob = Tensor::empty({gemm::packed_bytes(format, n, k)}, DType::kUInt8, weight.device());
  gemm::pack_weight(weight.data_as<float>(), n, k, format, blob.data());
  put_tensor(stack, 0, std::move(blob));
}

}  // namespace djl_attn::encoder
