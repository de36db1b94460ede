#include "encoder/encoder_layer_cpu.h"

#include "bert/bert_cpu.h"
#include "common/half.h"
#include "common/thread_pool.h"
#include "common/workspace.h"
#include "encoder/encoder_layer_plan.h"
#include "flash/flash_cpu.h"
#include "gemm/gemm.h"

namespace djl_attn::encoder {
namespace {

Workspace& thread_workspace() {
  thread_local Workspace workspace;
  return workspace;
}

// y[t] = x[t] · wᵀ, y [T, w.n].
void project(const void* x, const gemm::Weight& w, void* y, const EncoderLayerParams& p,
             void* scratch) {
  gemm::gemm({x, w.k, w, y, p.tokens, p.dtype, scratch});
}

// qkv[t] += bias for the 16-bit streams; float32 adds it as the attention loads q, k and v.
template <typename T>
void add_qkv_bias(T* qkv, const EncoderLayerParams& p) {
  const int64_t n = 3 * p.hidden_size;
  const int64_t grain = p.tokens * n < (1 << 16) ? p.tokens : 1;
  parallel_for(p.tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      T* row = qkv + t * n;
      for (int64_t j = 0; j < n; ++j) row[j] = from_float<T>(to_float(row[j]) + p.qkv_bias[j]);
    }
  });
}

// Each sequence's tokens attend to each other (no mask beyond the sequence): q, k and v are the
// three C-wide thirds of each qkv row.
template <typename T>
void attend(const T* qkv, T* out, float* lse, const EncoderLayerParams& p) {
  const int64_t c = p.hidden_size, d = p.head_dim;
  flash::FlashParams f{};
  f.q = qkv;
  f.k = qkv + c;
  f.v = qkv + 2 * c;
  f.out = out;
  f.lse = lse;
  f.lse_batch_stride = 0;
  f.lse_head_stride = p.tokens;  // [H, T]
  f.cu_seqlens_q = p.cu_seqlens;
  f.cu_seqlens_k = p.cu_seqlens;
  if constexpr (std::is_same_v<T, float>) {
    f.q_bias = p.qkv_bias;
    f.k_bias = p.qkv_bias + c;
    f.v_bias = p.qkv_bias + 2 * c;
  }
  f.q_seq_stride = f.k_seq_stride = f.v_seq_stride = 3 * c;
  f.q_head_stride = f.k_head_stride = f.v_head_stride = d;
  f.out_seq_stride = c;
  f.out_head_stride = d;
  f.batch = p.batch;
  f.total_q = f.total_k = p.tokens;
  f.seqlen_q = f.seqlen_k = p.max_seqlen;
  f.heads_q = f.heads_kv = p.heads;
  f.head_dim = d;
  f.scale = p.scale;
  f.causal = false;
  f.dtype = p.dtype;
  flash::run_flash_attention_cpu(f);
}

// out = LayerNorm(x + bias + residual) * gamma + beta.
void add_norm(const void* x, const float* bias, const void* residual, const float* gamma,
              const float* beta, void* out, const EncoderLayerParams& p) {
  bert::run_layernorm_cpu({x, bias, residual, gamma, beta, out, p.tokens, p.hidden_size,
                           p.norm_eps, p.dtype, ElementType::kFloat32});
}

template <typename T>
void run_typed(const EncoderLayerParams& p) {
  const EncoderLayerPlan plan = plan_encoder_layer(p);
  char* ws = thread_workspace().reserve(plan.bytes);
  T* x = static_cast<T*>(p.hidden);
  T* qkv = reinterpret_cast<T*>(ws + plan.qkv);
  T* attention = reinterpret_cast<T*>(ws + plan.attention);
  T* projected = reinterpret_cast<T*>(ws + plan.projected);
  T* h = reinterpret_cast<T*>(ws + plan.normed);
  T* up = reinterpret_cast<T*>(ws + plan.up);
  float* lse = reinterpret_cast<float*>(ws + plan.lse);
  void* scratch = ws + plan.scratch;

  project(x, p.qkv, qkv, p, scratch);
  if constexpr (!std::is_same_v<T, float>) add_qkv_bias(qkv, p);
  attend(qkv, attention, lse, p);
  project(attention, p.out, projected, p, scratch);
  add_norm(projected, p.out_bias, x, p.attn_norm_weight, p.attn_norm_bias, h, p);

  project(h, p.up, up, p, scratch);
  bert::run_elementwise_cpu({up, p.up_bias, nullptr, nullptr, nullptr, up, p.tokens,
                             p.intermediate,
                             p.gelu_tanh ? bert::Epilogue::kGeluTanh : bert::Epilogue::kGeluErf,
                             p.dtype, ElementType::kFloat32});
  project(up, p.down, projected, p, scratch);
  add_norm(projected, p.down_bias, h, p.ffn_norm_weight, p.ffn_norm_bias, x, p);
}

}  // namespace

void run_encoder_layer_cpu(const EncoderLayerParams& params) {
  switch (params.dtype) {
    case ElementType::kFloat32: return run_typed<float>(params);
    case ElementType::kFloat16: return run_typed<Half>(params);
    case ElementType::kBFloat16: return run_typed<BFloat16>(params);
  }
}

int64_t encoder_workspace_bytes() { return thread_workspace().capacity(); }

}  // namespace djl_attn::encoder
