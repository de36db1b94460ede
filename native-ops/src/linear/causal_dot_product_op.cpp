#include "linear/causal_dot_product_op.h"

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::linear {
namespace {

constexpr const char* kOp = "causal_dot_product";


}  // namespace

void causal_dot_product_boxed(shim::StableIValue* stack, const CausalDotProductBackend& backend) {
  // Take ownership of every argument first, so that each handle is freed however we leave.
  Tensor q = take_tensor(stack, 0);
  Tensor k = take_tensor(stack, 1);
  Tensor v = take_tensor(stack, 2);

  const ArgName q_name{kOp, "q"}, k_name{kOp, "k"}, v_name{kOp, "v"};
  check_dim(q, q_name, 4, "[B, H, L, E]");
  check_dim(k, k_name, 4, "[B, H, L, E]");
  check_dim(v, v_name, 4, "[B, H, L, M]");
  const int64_t batch = q.size(0), heads = q.size(1), seqlen = q.size(2), dim_qk = q.size(3);
  const int64_t dim_v = v.size(3);
  check_size(k, k_name, 0, "B", batch, "the batch of q");
  check_size(k, k_name, 1, "H", heads, "the heads of q");
  check_size(k, k_name, 2, "L", seqlen, "the length of q");
  check_size(k, k_name, 3, "E", dim_qk, "the feature dim of q");
  check_size(v, v_name, 0, "B", batch, "the batch of q");
  check_size(v, v_name, 1, "H", heads, "the heads of q");
  check_size(v, v_name, 2, "L", seqlen, "the length of q");
  if (dim_qk < 1 || dim_qk > kMaxDim) {
    fail_invalid(q_name.prefix(), ": expected a feature dim E in [1, ", kMaxDim, "], got ", dim_qk);
  }
  if (dim_v < 1 || dim_v > kMaxDim) {
    fail_invalid(v_name.prefix(), ": expected a feature dim M in [1, ", kMaxDim, "], got ", dim_v);
  }
  // The CUDA kernels run one thread block per (batch, head, value column or tile of columns) in
  // one grid of at most 2^31 - 1 blocks: the rule is stated here, for every backend, so that the
  // CPU and CUDA accept the same calls (divided, not multiplied: the sizes may be absurd).
  if (batch > 0 && heads > 0 &&
      (batch > kMaxGridBlocks / heads || batch * heads > kMaxGridBlocks / dim_v)) {
    fail_invalid(q_name.prefix(), ": expected B * H * M <= 2^31 - 1 (the thread blocks of one ",
                 "CUDA grid), got B = ", batch, ", H = ", heads, ", M = ", dim_v);
  }
  check_kernel_dtype(q, q_name);
  check_same_dtype(k, k_name, q, q_name);
  check_same_dtype(v, v_name, q, q_name);
  check_supported_device(q, q_name);
  check_same_device(k, k_name, q, q_name);
  check_same_device(v, v_name, q, q_name);
  check_last_dim_contiguous(q, q_name);
  check_last_dim_contiguous(k, k_name);
  check_last_dim_contiguous(v, v_name);

  Tensor out = Tensor::empty({batch, heads, seqlen, dim_v}, q.dtype(), q.device());

  if (batch > 0 && heads > 0 && seqlen > 0) {
    CausalDotProductParams p{};
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.out = out.data();
    p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_seq_stride = q.stride(2);
    p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_seq_stride = k.stride(2);
    p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_seq_stride = v.stride(2);
    p.out_batch_stride = heads * seqlen * dim_v;
    p.out_head_stride = seqlen * dim_v;
    p.out_seq_stride = dim_v;
    p.batch = batch;
    p.heads = heads;
    p.seqlen = seqlen;
    p.dim_qk = dim_qk;
    p.dim_v = dim_v;
    p.dtype = element_type(q.dtype());
    backend.launch(p);
  }

  put_tensor(stack, 0, std::move(out));
}

}  // namespace djl_attn::linear
