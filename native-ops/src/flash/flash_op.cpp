#include "flash/flash_op.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::flash {
namespace {

constexpr const char* kOp = "flash_attention";

ElementType element_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return ElementType::kFloat16;
    case DType::kBFloat16: return ElementType::kBFloat16;
    default: return ElementType::kFloat32;  // checked to be float32 before
  }
}

void check_kv_lens(const Tensor& kv_lens, const Tensor& q, int64_t seqlen_k,
                   const FlashBackend& backend) {
  const ArgName name{kOp, "kv_lens"};
  check_dim(kv_lens, name, 1, "[B]");
  check_size(kv_lens, name, 0, "B", q.size(0), "the batch of q");
  check_dtype(kv_lens, name, DType::kInt32);
  check_same_device(kv_lens, name, q, {kOp, "q"});
  check_contiguous(kv_lens, name);
  const int64_t batch = kv_lens.size(0);
  if (batch == 0) return;
  std::vector<int32_t> values(batch);
  if (backend.copy_to_host != nullptr) {
    backend.copy_to_host(values.data(), kv_lens.data(), values.size() * sizeof(int32_t));
  } else {
    const int32_t* src = kv_lens.data_as<int32_t>();
    values.assign(src, src + batch);
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (values[b] < 0 || values[b] > seqlen_k) {
      fail_invalid(name.prefix(), ": expected values in [0, Sk = ", seqlen_k, "], got ", values[b],
                   " at index ", b);
    }
  }
}

}  // namespace

void flash_attention_boxed(shim::StableIValue* stack, const FlashBackend& backend) {
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor q = take_tensor(stack, 0);
  Tensor k = take_tensor(stack, 1);
  Tensor v = take_tensor(stack, 2);
  std::optional<Tensor> kv_lens = take_optional_tensor(stack, 3);
  const double scale = read_float(stack, 4);
  const bool causal = read_bool(stack, 5);

  const ArgName q_name{kOp, "q"}, k_name{kOp, "k"}, v_name{kOp, "v"};
  check_dim(q, q_name, 4, "[B, Sq, Hq, D]");
  check_dim(k, k_name, 4, "[B, Sk, Hkv, D]");
  check_dim(v, v_name, 4, "[B, Sk, Hkv, D]");
  const int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), dim = q.size(3);
  const int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  check_size(k, k_name, 0, "B", batch, "the batch of q");
  check_size(k, k_name, 3, "D", dim, "the head dim of q");
  check_size(v, v_name, 0, "B", batch, "the batch of q");
  check_size(v, v_name, 1, "Sk", seqlen_k, "the sequence length of k");
  check_size(v, v_name, 2, "Hkv", heads_kv, "the heads of k");
  check_size(v, v_name, 3, "D", dim, "the head dim of q");
  if (heads_kv < 1 || heads_q % heads_kv != 0) {
    fail_invalid(kOp, ": k: expected a number of heads Hkv >= 1 that divides the query heads Hq = ",
                 heads_q, ", got Hkv = ", heads_kv);
  }
  if (dim < 1 || dim > kMaxHeadDim) {
    fail_invalid(q_name.prefix(), ": expected a head dim D in [1, ", kMaxHeadDim, "], got ", dim);
  }
  check_dtype_in(q, q_name, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  check_same_dtype(k, k_name, q, q_name);
  check_same_dtype(v, v_name, q, q_name);
  check_supported_device(q, q_name);
  check_same_device(k, k_name, q, q_name);
  check_same_device(v, v_name, q, q_name);
  check_last_dim_contiguous(q, q_name);
  check_last_dim_contiguous(k, k_name);
  check_last_dim_contiguous(v, v_name);
  if (!std::isfinite(scale)) fail_invalid(kOp, ": scale: expected a finite value, got ", scale);
  if (kv_lens) check_kv_lens(*kv_lens, q, seqlen_k, backend);

  const Device device = q.device();
  Tensor out = Tensor::empty({batch, seqlen_q, heads_q, dim}, q.dtype(), device);
  Tensor lse = Tensor::empty({batch, heads_q, seqlen_q}, DType::kFloat32, device);

  if (batch > 0 && seqlen_q > 0 && heads_q > 0) {
    FlashParams p{};
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.out = out.data();
    p.lse = lse.data_as<float>();
    p.kv_lens = kv_lens ? kv_lens->data_as<int32_t>() : nullptr;
    p.q_batch_stride = q.stride(0), p.q_seq_stride = q.stride(1), p.q_head_stride = q.stride(2);
    p.k_batch_stride = k.stride(0), p.k_seq_stride = k.stride(1), p.k_head_stride = k.stride(2);
    p.v_batch_stride = v.stride(0), p.v_seq_stride = v.stride(1), p.v_head_stride = v.stride(2);
    p.out_batch_stride = seqlen_q * heads_q * dim;
    p.out_seq_stride = heads_q * dim;
    p.out_head_stride = dim;
    p.batch = batch;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.heads_q = heads_q;
    p.heads_kv = heads_kv;
    p.head_dim = dim;
    p.scale = static_cast<float>(scale);
    p.causal = causal;
    p.dtype = element_type(q.dtype());
    backend.launch(p);
  }

  put_tensor(stack, 0, std::move(out));
  put_tensor(stack, 1, std::move(lse));
}

}  // namespace djl_attn::flash
