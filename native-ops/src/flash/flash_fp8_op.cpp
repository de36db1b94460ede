#include "flash/flash_fp8_op.h"

#include <optional>
#include <utility>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"
#include "flash/flash_fp8_params.h"

namespace djl_attn::flash {
namespace {

constexpr const char* kOp = "flash_attention_fp8";

// q's dtype: e4m3fn bytes, as a float8_e4m3fn tensor or a uint8 one (the paged fp8 caches take
// the same two).
void check_fp8_dtype(const Tensor& q, ArgName name) {
  check_dtype_in(q, name, {DType::kFloat8E4M3FN, DType::kUInt8});
}

// A descale: float32 [1] (per tensor) or [B, Hkv] (per batch row and key/value head), on q's
// device, contiguous; absent, the factor is 1. Its values are not read (that would cost a copy
// from the GPU per call): they multiply the inputs as they are, whatever their sign.
Fp8Descale checked_descale(const char* arg, const std::optional<Tensor>& descale, const Tensor& q,
                           int64_t batch, int64_t heads_kv) {
  if (!descale) return Fp8Descale{};
  const Tensor& t = *descale;
  const ArgName name{kOp, arg};
  if (t.dim() == 1) {
    if (t.size(0) != 1) {
      fail_invalid(name.prefix(), ": expected shape [1] (per tensor) or [B, Hkv], got ",
                   shape_str(t.sizes()));
    }
  } else if (t.dim() == 2) {
    check_size(t, name, 0, "B", batch, "the batch of q");
    check_size(t, name, 1, "Hkv", heads_kv, "the heads of k");
  } else {
    fail_invalid(name.prefix(), ": expected 1 dim [1] or 2 dims [B, Hkv], got ", t.dim());
  }
  check_dtype(t, name, DType::kFloat32);
  check_same_device(t, name, q, {kOp, "q"});
  check_contiguous(t, name);
  if (t.dim() == 1) return Fp8Descale{t.data_as<float>(), 0, 0};
  return Fp8Descale{t.data_as<float>(), heads_kv, 1};
}

}  // namespace

void flash_attention_fp8_boxed(shim::StableIValue* stack, const FlashBackend& backend) {
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor q = take_tensor(stack, 0);
  Tensor k = take_tensor(stack, 1);
  Tensor v = take_tensor(stack, 2);
  std::optional<Tensor> kv_lens = take_optional_tensor(stack, 3);
  const double scale = read_float(stack, 4);
  const bool causal = read_bool(stack, 5);
  std::optional<Tensor> q_descale = take_optional_tensor(stack, 6);
  std::optional<Tensor> k_descale = take_optional_tensor(stack, 7);
  std::optional<Tensor> v_descale = take_optional_tensor(stack, 8);
  const bool out_float16 = read_bool(stack, 9);

  check_batched_qkv(kOp, q, k, v, check_fp8_dtype);
  const int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), dim = q.size(3);
  const int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  check_qk_scale(kOp, scale);
  // The Hopper e4m3 kernel (like its 16-bit forms) takes each row's maximum over the raw scores
  // before the scale multiplies them, which is the maximum of the scaled scores only for a
  // positive scale; both backends accept the same calls.
  if (scale <= 0) fail_invalid(kOp, ": scale: expected a finite value > 0, got ", scale);
  // Every device check (the descales') before kv_lens' values are read: a call with one of them
  // on another device than q reaches that device's backend, whose copy to the host must not
  // meet a pointer it cannot read.
  const Fp8Descale qd = checked_descale("q_descale", q_descale, q, batch, heads_kv);
  const Fp8Descale kd = checked_descale("k_descale", k_descale, q, batch, heads_kv);
  const Fp8Descale vd = checked_descale("v_descale", v_descale, q, batch, heads_kv);
  if (kv_lens) check_kv_lens(kOp, *kv_lens, q, seqlen_k, backend.copy_to_host);

  const Device device = q.device();
  const DType out_dtype = out_float16 ? DType::kFloat16 : DType::kBFloat16;
  Tensor out = Tensor::empty({batch, seqlen_q, heads_q, dim}, out_dtype, device);
  Tensor lse = Tensor::empty({batch, heads_q, seqlen_q}, DType::kFloat32, device);

  if (batch > 0 && seqlen_q > 0 && heads_q > 0) {
    FlashFp8Params p;
    p.attn = flash_params(flash_operand(q), flash_operand(k), flash_operand(v), out.data(),
                          lse.data_as<float>(), batch, seqlen_q, seqlen_k, heads_q, heads_kv, dim,
                          static_cast<float>(scale), causal, element_type(out_dtype));
    p.attn.kv_lens = kv_lens ? kv_lens->data_as<int32_t>() : nullptr;
    p.q_descale = qd;
    p.k_descale = kd;
    p.v_descale = vd;
    backend.launch_fp8(p);
  }

  put_tensor(stack, 0, std::move(out));
  put_tensor(stack, 1, std::move(lse));
}

}  // namespace djl_attn::flash
