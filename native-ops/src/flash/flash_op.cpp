#include "flash/flash_op.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::flash {
namespace {

constexpr const char* kOp = "flash_attention";
constexpr const char* kVarlenOp = "flash_attention_varlen";

// The rules q, k and v share in both layouts: heads, head dim, dtype, device, last dim
// contiguous. `dim_axis` and `head_axis` locate D and H (3 and 2 batched, 2 and 1 varlen).
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, int head_axis,
               int dim_axis, QueryDTypeCheck check_q_dtype) {
  const ArgName q_name{op, "q"}, k_name{op, "k"}, v_name{op, "v"};
  const int64_t heads_q = q.size(head_axis), dim = q.size(dim_axis);
  const int64_t heads_kv = k.size(head_axis);
  check_size(k, k_name, dim_axis, "D", dim, "the head dim of q");
  check_size(v, v_name, head_axis - 1, head_axis == 2 ? "Sk" : "total_k", k.size(head_axis - 1),
             "the sequence length of k");
  check_size(v, v_name, head_axis, "Hkv", heads_kv, "the heads of k");
  check_size(v, v_name, dim_axis, "D", dim, "the head dim of q");
  if (heads_kv < 1 || heads_q % heads_kv != 0) {
    fail_invalid(op, ": k: expected a number of heads Hkv >= 1 that divides the query heads Hq = ",
                 heads_q, ", got Hkv = ", heads_kv);
  }
  if (dim < 1 || dim > kMaxHeadDim) {
    fail_invalid(q_name.prefix(), ": expected a head dim D in [1, ", kMaxHeadDim, "], got ", dim);
  }
  check_q_dtype(q, q_name);
  check_same_dtype(k, k_name, q, q_name);
  check_same_dtype(v, v_name, q, q_name);
  check_supported_device(q, q_name);
  check_same_device(k, k_name, q, q_name);
  check_same_device(v, v_name, q, q_name);
  check_last_dim_contiguous(q, q_name);
  check_last_dim_contiguous(k, k_name);
  check_last_dim_contiguous(v, v_name);
}

// cu_seqlens: int32 [B + 1] on q's device and contiguous. Checked for both offsets before either
// is read: a call with one of them on another device than q reaches the other device's backend,
// whose copy to the host must not meet a pointer it cannot read.
void check_cu_seqlens_layout(const Tensor& cu, const char* arg, const Tensor& q,
                             int64_t batch_plus_one) {
  const ArgName name{kVarlenOp, arg};
  check_dim(cu, name, 1, "[B + 1]");
  if (batch_plus_one >= 0) {
    check_size(cu, name, 0, "B + 1", batch_plus_one, "the size of cu_seqlens_q");
  } else if (cu.size(0) < 1) {
    fail_invalid(name.prefix(), ": expected at least 1 element [B + 1], got 0");
  }
  check_dtype(cu, name, DType::kInt32);
  check_same_device(cu, name, q, {kVarlenOp, "q"});
  check_contiguous(cu, name);
}

// cu_seqlens values: starting at 0, non-decreasing, ending at `total`, with no length above
// `max_seqlen` (read on the host where value checks are on).
void check_cu_seqlens_values(const Tensor& cu, const char* arg, int64_t total,
                             int64_t max_seqlen, const char* total_name, const char* max_name,
                             const FlashBackend& backend) {
  const ArgName name{kVarlenOp, arg};
  std::vector<int32_t> values = read_int32(cu, cu.size(0), backend.copy_to_host);
  if (values[0] != 0) fail_invalid(name.prefix(), ": expected 0 at index 0, got ", values[0]);
  for (size_t b = 1; b < values.size(); ++b) {
    const int64_t len = static_cast<int64_t>(values[b]) - values[b - 1];
    if (len < 0) {
      fail_invalid(name.prefix(), ": expected non-decreasing values, got ", values[b],
                   " after ", values[b - 1], " at index ", b);
    }
    if (len > max_seqlen) {
      fail_invalid(name.prefix(), ": expected sequence lengths <= ", max_name, " = ", max_seqlen,
                   ", got ", len, " for sequence ", b - 1);
    }
  }
  if (values.back() != total) {
    fail_invalid(name.prefix(), ": expected a last value equal to ", total_name, " = ", total,
                 ", got ", values.back());
  }
}

// The arguments both flash operators end with, as the schema gives them.
struct FeatureArgs {
  int64_t window_left, window_right;
  double softcap;
  std::optional<Tensor> alibi_slopes;
};

// window_left, window_right >= -1; softcap finite and >= 0; alibi_slopes float32 [Hq] or
// [B, Hq] on q's device, contiguous. `batch` is B (the sequences of a varlen batch).
void check_features(const char* op, const FeatureArgs& f, const Tensor& q, int64_t batch,
                    int64_t heads_q) {
  check_window_size({op, "window_left"}, f.window_left);
  check_window_size({op, "window_right"}, f.window_right);
  checked_softcap(op, f.softcap);
  if (!f.alibi_slopes) return;
  const Tensor& slopes = *f.alibi_slopes;
  const ArgName name{op, "alibi_slopes"};
  if (slopes.dim() == 1) {
    check_size(slopes, name, 0, "Hq", heads_q, "the heads of q");
  } else if (slopes.dim() == 2) {
    check_size(slopes, name, 0, "B", batch, "the batch");
    check_size(slopes, name, 1, "Hq", heads_q, "the heads of q");
  } else {
    fail_invalid(name.prefix(), ": expected 1 dim [Hq] or 2 dims [B, Hq], got ", slopes.dim());
  }
  check_dtype(slopes, name, DType::kFloat32);
  check_same_device(slopes, name, q, {op, "q"});
  check_contiguous(slopes, name);
}

void set_features(FlashParams& p, const FeatureArgs& f) {
  set_features(p, f.window_left, f.window_right, static_cast<float>(f.softcap),
               f.alibi_slopes ? f.alibi_slopes->data_as<float>() : nullptr,
               f.alibi_slopes && f.alibi_slopes->dim() == 2);
}

FeatureArgs take_features(shim::StableIValue* stack, int first) {
  FeatureArgs f{read_int(stack, first), read_int(stack, first + 1), read_float(stack, first + 2),
                take_optional_tensor(stack, first + 3)};
  return f;
}

}  // namespace

FlashOperand flash_operand(const Tensor& t) {
  if (t.dim() == 3) return FlashOperand{t.data(), 0, t.stride(0), t.stride(1)};
  return FlashOperand{t.data(), t.stride(0), t.stride(1), t.stride(2)};
}

FlashParams flash_params(FlashOperand q, FlashOperand k, FlashOperand v, void* out, float* lse,
                         int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                         int64_t heads_kv, int64_t head_dim, float scale, bool causal,
                         ElementType dtype) {
  FlashParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = out;
  p.lse = lse;
  p.q_batch_stride = q.batch_stride;
  p.q_seq_stride = q.seq_stride;
  p.q_head_stride = q.head_stride;
  p.k_batch_stride = k.batch_stride;
  p.k_seq_stride = k.seq_stride;
  p.k_head_stride = k.head_stride;
  p.v_batch_stride = v.batch_stride;
  p.v_seq_stride = v.seq_stride;
  p.v_head_stride = v.head_stride;
  // The outputs are allocated contiguous: out [B, Sq, Hq, D]; the logsumexp [B, Hq, Sq]
  // (lse_head_stride 0: the default layout).
  p.out_batch_stride = seqlen_q * heads_q * head_dim;
  p.out_seq_stride = heads_q * head_dim;
  p.out_head_stride = head_dim;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.scale = scale;
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

void set_varlen(FlashParams& p, const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                int64_t total_q, int64_t total_k) {
  p.cu_seqlens_q = cu_seqlens_q;
  p.cu_seqlens_k = cu_seqlens_k;
  p.total_q = total_q;
  p.total_k = total_k;
  // out [total_q, Hq, D]; the logsumexp [Hq, total_q].
  p.out_batch_stride = 0;
  p.lse_head_stride = total_q;
}

void set_features(FlashParams& p, int64_t window_left, int64_t window_right, float softcap,
                  const float* alibi_slopes, bool alibi_per_batch) {
  set_window(p, window_left, window_right);  // normalised (flash_params.h)
  p.softcap = softcap;
  p.alibi_slopes = alibi_slopes;
  p.alibi_batch_stride = alibi_slopes != nullptr && alibi_per_batch ? p.heads_q : 0;
}

void check_query_tiles(ArgName name, int64_t batch, int64_t seqlen_q, int64_t heads_q) {
  const int64_t tiles = (seqlen_q + kQueryTileRows - 1) / kQueryTileRows;
  // Divided rather than multiplied: B * Hq alone may overflow for absurd varlen batches.
  if (batch == 0 || heads_q == 0 || tiles == 0) return;
  if (batch > kMaxQueryTiles / heads_q || batch * heads_q > kMaxQueryTiles / tiles) {
    fail_invalid(name.prefix(), ": expected B * Hq * ceil(Sq / ", kQueryTileRows, ") <= 2^31 - 1",
                 " (the query tiles of one CUDA grid), got B = ", batch, ", Hq = ", heads_q,
                 ", Sq = ", seqlen_q);
  }
}

void check_kv_lens(const char* op, const Tensor& kv_lens, const Tensor& q, int64_t seqlen_k,
                   CopyToHost copy_to_host) {
  const ArgName name{op, "kv_lens"};
  check_dim(kv_lens, name, 1, "[B]");
  check_size(kv_lens, name, 0, "B", q.size(0), "the batch of q");
  check_dtype(kv_lens, name, DType::kInt32);
  check_same_device(kv_lens, name, q, {op, "q"});
  check_contiguous(kv_lens, name);
  const int64_t batch = kv_lens.size(0);
  const std::vector<int32_t> values = read_int32(kv_lens, batch, copy_to_host);
  for (int64_t b = 0; b < batch; ++b) {
    if (values[b] < 0 || values[b] > seqlen_k) {
      fail_invalid(name.prefix(), ": expected values in [0, Sk = ", seqlen_k, "], got ", values[b],
                   " at index ", b);
    }
  }
}

void check_batched_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                       QueryDTypeCheck check_q_dtype) {
  const ArgName q_name{op, "q"}, k_name{op, "k"}, v_name{op, "v"};
  check_dim(q, q_name, 4, "[B, Sq, Hq, D]");
  check_dim(k, k_name, 4, "[B, Sk, Hkv, D]");
  check_dim(v, v_name, 4, "[B, Sk, Hkv, D]");
  check_size(k, k_name, 0, "B", q.size(0), "the batch of q");
  check_size(v, v_name, 0, "B", q.size(0), "the batch of q");
  check_qkv(op, q, k, v, 2, 3, check_q_dtype);
  if (q.size(1) > kMaxSeqLen) {
    fail_invalid(q_name.prefix(), ": expected Sq <= 2^30, got ", q.size(1));
  }
  if (k.size(1) > kMaxSeqLen) {
    fail_invalid(k_name.prefix(), ": expected Sk <= 2^30, got ", k.size(1));
  }
  check_query_tiles(q_name, q.size(0), q.size(1), q.size(2));
}

void flash_attention_boxed(shim::StableIValue* stack, const FlashBackend& backend) {
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor q = take_tensor(stack, 0);
  Tensor k = take_tensor(stack, 1);
  Tensor v = take_tensor(stack, 2);
  std::optional<Tensor> kv_lens = take_optional_tensor(stack, 3);
  const double scale = read_float(stack, 4);
  const bool causal = read_bool(stack, 5);
  const FeatureArgs features = take_features(stack, 6);

  check_batched_qkv(kOp, q, k, v, check_kernel_dtype);
  const int64_t batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), dim = q.size(3);
  const int64_t seqlen_k = k.size(1), heads_kv = k.size(2);
  check_qk_scale(kOp, scale);
  // The features (alibi_slopes' device among them) before kv_lens' values are read: a call
  // with the slopes on another device than q reaches that device's backend, whose copy to the
  // host must not meet a pointer it cannot read.
  check_features(kOp, features, q, batch, heads_q);
  if (kv_lens) check_kv_lens(kOp, *kv_lens, q, seqlen_k, backend.copy_to_host);

  const Device device = q.device();
  Tensor out = Tensor::empty({batch, seqlen_q, heads_q, dim}, q.dtype(), device);
  Tensor lse = Tensor::empty({batch, heads_q, seqlen_q}, DType::kFloat32, device);

  if (batch > 0 && seqlen_q > 0 && heads_q > 0) {
    FlashParams p = flash_params(flash_operand(q), flash_operand(k), flash_operand(v), out.data(),
                                 lse.data_as<float>(), batch, seqlen_q, seqlen_k, heads_q,
                                 heads_kv, dim, static_cast<float>(scale), causal,
                                 element_type(q.dtype()));
    p.kv_lens = kv_lens ? kv_lens->data_as<int32_t>() : nullptr;
    set_features(p, features);
    backend.launch(p);
  }

  put_tensor(stack, 0, std::move(out));
  put_tensor(stack, 1, std::move(lse));
}

void flash_attention_varlen_boxed(shim::StableIValue* stack, const FlashBackend& backend) {
  Tensor q = take_tensor(stack, 0);
  Tensor k = take_tensor(stack, 1);
  Tensor v = take_tensor(stack, 2);
  Tensor cu_seqlens_q = take_tensor(stack, 3);
  Tensor cu_seqlens_k = take_tensor(stack, 4);
  const int64_t max_seqlen_q = read_int(stack, 5);
  const int64_t max_seqlen_k = read_int(stack, 6);
  const double scale = read_float(stack, 7);
  const bool causal = read_bool(stack, 8);
  const FeatureArgs features = take_features(stack, 9);

  const ArgName q_name{kVarlenOp, "q"}, k_name{kVarlenOp, "k"}, v_name{kVarlenOp, "v"};
  check_dim(q, q_name, 3, "[total_q, Hq, D]");
  check_dim(k, k_name, 3, "[total_k, Hkv, D]");
  check_dim(v, v_name, 3, "[total_k, Hkv, D]");
  check_qkv(kVarlenOp, q, k, v, 1, 2, check_kernel_dtype);
  const int64_t total_q = q.size(0), heads_q = q.size(1), dim = q.size(2);
  const int64_t total_k = k.size(0), heads_kv = k.size(1);
  if (max_seqlen_q < 0 || max_seqlen_q > total_q) {
    fail_invalid(kVarlenOp, ": max_seqlen_q: expected a value in [0, total_q = ", total_q,
                 "], got ", max_seqlen_q);
  }
  if (max_seqlen_k < 0 || max_seqlen_k > total_k) {
    fail_invalid(kVarlenOp, ": max_seqlen_k: expected a value in [0, total_k = ", total_k,
                 "], got ", max_seqlen_k);
  }
  check_qk_scale(kVarlenOp, scale);
  check_cu_seqlens_layout(cu_seqlens_q, "cu_seqlens_q", q, -1);
  const int64_t batch = cu_seqlens_q.size(0) - 1;
  check_cu_seqlens_layout(cu_seqlens_k, "cu_seqlens_k", q, batch + 1);
  // Every device check (alibi_slopes' too) before the offsets' values are read.
  check_features(kVarlenOp, features, q, batch, heads_q);
  check_cu_seqlens_values(cu_seqlens_q, "cu_seqlens_q", total_q, max_seqlen_q, "total_q",
                          "max_seqlen_q", backend);
  check_cu_seqlens_values(cu_seqlens_k, "cu_seqlens_k", total_k, max_seqlen_k, "total_k",
                          "max_seqlen_k", backend);
  // The kernels' grids are sized by the longest sequence.
  check_query_tiles({kVarlenOp, "max_seqlen_q"}, batch, max_seqlen_q, heads_q);

  const Device device = q.device();
  Tensor out = Tensor::empty({total_q, heads_q, dim}, q.dtype(), device);
  // [Hq, total_q], FlashAttention's varlen layout: each head's rows are contiguous.
  Tensor lse = Tensor::empty({heads_q, total_q}, DType::kFloat32, device);

  if (batch > 0 && total_q > 0 && heads_q > 0) {
    FlashParams p = flash_params(flash_operand(q), flash_operand(k), flash_operand(v), out.data(),
                                 lse.data_as<float>(), batch, max_seqlen_q, max_seqlen_k,
                                 heads_q, heads_kv, dim, static_cast<float>(scale), causal,
                                 element_type(q.dtype()));
    set_varlen(p, cu_seqlens_q.data_as<int32_t>(), cu_seqlens_k.data_as<int32_t>(), total_q,
               total_k);
    set_features(p, features);
    backend.launch(p);
  }

  put_tensor(stack, 0, std::move(out));
  put_tensor(stack, 1, std::move(lse));
}

}  // namespace djl_attn::flash
