// decoder_layer on CUDA: the launch sequence of one layer (docs/design/fused-decoder-layer.md,
// section 7). Eleven launches, no host synchronisation:
//   norm1 | GEMM qkv | bias + RoPE | cache write | paged attention | GEMM out |
//   residual + norm2 | GEMM up | activation | GEMM down | residual
// six where the skinny kernel runs the GEMMs (a decode step's rows: the norms in their
// prologues; bias + RoPE, the activation and the residual adds in their epilogues). GEMMs through cuda/gemm (cuBLASLt or the skinny kernel), the cache write
// and the attention on the paged family's own launchers, the rest in decoder_layer_kernels.cuh.
#include "cuda/decoder/decoder_layer_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "common/tensor.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"
#include "cuda/common/switches.h"
#include "cuda/decoder/decoder_layer_kernels.cuh"
#include "cuda/flash/flash_cuda.h"
#include "cuda/gemm/gemm_cuda.h"
#include "cuda/paged/paged_cuda.h"
#include "decoder/decoder_layer_attention.h"
#include "decoder/decoder_layer_plan.h"

namespace djl_attn::cuda {
namespace {

namespace k = decoder_kernels;
using decoder::DecoderLayerParams;
using decoder::DecoderLayerPlan;
using decoder::NormType;

// The elementwise launches of one dtype.
template <typename T>
struct Stages {
  const DecoderLayerParams& p;
  const DecoderLayerPlan& plan;
  char* ws;
  cudaStream_t stream;

  T* at(int64_t offset) const { return reinterpret_cast<T*>(ws + offset); }
  T* hidden() const { return static_cast<T*>(p.hidden); }
  size_t row_bytes() const { return static_cast<size_t>(p.hidden_size) * sizeof(float); }
  bool layer_norm() const { return p.norm_type == NormType::kLayer; }

  // The row kernels keep a float32 row in shared memory: past 48 KiB (hidden > 12288) they
  // need the opt-in limit.
  template <typename Kernel>
  void allow_row(Kernel kernel) const {
    if (row_bytes() > 48 * 1024) {
      DJL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(row_bytes())));
    }
  }

  void norm1() const {
    allow_row(k::norm_rows_kernel<T>);
    k::norm_rows_kernel<T><<<p.num_tokens, k::kRowThreads, row_bytes(), stream>>>(
        hidden(), at(plan.normed), p.hidden_size, p.attn_norm.weight, p.attn_norm.bias,
        layer_norm(), p.norm_eps);
    DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_layer norm_rows_kernel");
  }

  void bias_rope() const {
    if (p.qkv.bias == nullptr && p.rope_cos_sin == nullptr) return;
    const int64_t width = (p.heads_q + 2 * p.heads_kv) * p.head_dim;
    const dim3 grid(static_cast<unsigned>(p.num_tokens),
                    static_cast<unsigned>((width + k::kRowThreads - 1) / k::kRowThreads));
    k::bias_rope_kernel<T><<<grid, k::kRowThreads, 0, stream>>>(
        at(plan.qkv), p.qkv.bias, p.rope_cos_sin, p.positions, p.heads_q + p.heads_kv,
        p.heads_q + 2 * p.heads_kv, p.head_dim, p.rope_dim, p.rope_interleaved);
    DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_layer bias_rope_kernel");
  }

  // x += post?(delta + bias); then normed = norm2(x) when `next_norm`.
  void residual(int64_t delta, const float* bias, const float* post_gain, bool next_norm) const {
    allow_row(k::residual_kernel<T>);
    k::residual_kernel<T><<<p.num_tokens, k::kRowThreads, row_bytes(), stream>>>(
        hidden(), at(delta), p.hidden_size, bias, post_gain, p.norm_eps,
        next_norm ? at(plan.normed) : nullptr, p.mlp_norm.weight, p.mlp_norm.bias, layer_norm());
    DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_layer residual_kernel");
  }

  void activation(int sm_count) const {
    const int64_t total = p.num_tokens * p.intermediate;
    const int threads = 256;
    const int blocks = static_cast<int>(
        std::min<int64_t>((total + threads - 1) / threads, static_cast<int64_t>(sm_count) * 8));
    k::activation_kernel<T><<<std::max(blocks, 1), threads, 0, stream>>>(
        at(plan.up), p.up.bias, at(plan.activated), p.num_tokens, p.intermediate,
        static_cast<int>(p.activation));
    DJL_ATTN_CUDA_CHECK_LAUNCH("decoder_layer activation_kernel");
  }
};

GemmCall gemm(const DecoderLayerParams& p, const void* a, const decoder::Projection& w, void* d) {
  return GemmCall{p.dtype, a, w.weight, d, p.num_tokens, w.out, w.in, w.in, w.out};
}

GemmNorm gemm_norm(const DecoderLayerParams& p, const decoder::NormWeights& norm) {
  return GemmNorm{norm.weight, norm.bias, p.norm_type == NormType::kLayer, p.norm_eps};
}

// The up projection with the MLP's activation as its epilogue: d = activated [T, I]; with
// `norm`, a is the hidden state and the GEMM reads its norm.
GemmCall activated_up(const DecoderLayerParams& p, const void* a, void* d,
                      const GemmNorm* norm = nullptr) {
  GemmCall call = gemm(p, a, p.up, d);
  call.norm = norm;
  call.n = call.ldd = p.intermediate;  // a gated weight has 2 I rows: gate, then up
  call.bias = p.up.bias;
  switch (p.activation) {
    case decoder::Activation::kSwiGlu: call.epilogue = GemmEpilogue::kSwiGlu; break;
    case decoder::Activation::kGeGluTanh: call.epilogue = GemmEpilogue::kGeGlu; break;
    case decoder::Activation::kGeluTanh: call.epilogue = GemmEpilogue::kGelu; break;
  }
  return call;
}

// A projection added to the hidden state in its epilogue (no Gemma-2 post-norm: that needs the
// whole row).
GemmCall residual(const DecoderLayerParams& p, const void* a, const decoder::Projection& w) {
  GemmCall call = gemm(p, a, w, p.hidden);
  call.ldd = p.hidden_size;
  call.bias = w.bias;
  call.epilogue = GemmEpilogue::kResidual;
  return call;
}

// Chunks that are their sequences' whole contexts attend only their own k and v: causal varlen
// flash attention straight over the qkv rows (strided views: q heads, then k, then v), as
// FlashAttention's varlen prefill runs. An FP8 cache too: a prefill batch attends its new
// tokens unquantised on both backends (decoder_layer_attention.h, prefill_params).
flash::FlashParams fresh_chunk_params(const DecoderLayerParams& p, const char* qkv, void* out,
                                      float* lse) {
  const int64_t e = element_size(p.dtype), row = p.qkv.out;
  flash::FlashParams f{};
  f.q = qkv;
  f.k = qkv + p.heads_q * p.head_dim * e;
  f.v = qkv + (p.heads_q + p.heads_kv) * p.head_dim * e;
  f.out = out;
  f.lse = lse;
  f.lse_batch_stride = 0;
  f.lse_head_stride = p.num_tokens;  // [Hq, total_q]
  f.cu_seqlens_q = f.cu_seqlens_k = p.cache.cu_seqlens_q;
  f.q_seq_stride = f.k_seq_stride = f.v_seq_stride = row;
  f.q_head_stride = f.k_head_stride = f.v_head_stride = p.head_dim;
  f.out_seq_stride = p.heads_q * p.head_dim;
  f.out_head_stride = p.head_dim;
  f.batch = p.cache.num_seqs;
  f.total_q = f.total_k = p.num_tokens;
  f.seqlen_q = f.seqlen_k = p.cache.max_seqlen_q;
  f.heads_q = p.heads_q;
  f.heads_kv = p.heads_kv;
  f.head_dim = p.head_dim;
  f.scale = p.scale;
  f.causal = true;
  f.dtype = p.dtype;
  flash::set_window(f, p.window_left, -1);
  f.softcap = p.softcap;
  return f;
}

// Decode rows only: the tuned split-KV decode kernels. Fresh chunks: flash varlen (above). Any
// other batch: the chunked-prefill kernel, which takes both kinds of rows over the cache.
void attention(const DecoderLayerParams& p, const char* qkv, void* out, int device) {
  if (decoder::is_decode_batch(p)) {
    return paged::run_paged_attention_cuda(decoder::decode_params(p, qkv, out));
  }
  if (p.cache.fresh_chunks) {
    const Scratch lse(static_cast<size_t>(p.heads_q * p.num_tokens) * sizeof(float), device);
    return flash::launch_flash_attention_cuda(
        fresh_chunk_params(p, qkv, out, lse.data_as<float>()));
  }
  paged::run_paged_prefill_cuda(decoder::prefill_params(p, qkv, out));
}

template <typename T>
void run_typed(const DecoderLayerParams& p, int device) {
  const DecoderLayerPlan plan = decoder::plan_decoder_layer(p);
  // The layer's temporaries and cuBLASLt's workspace: PyTorch's caching allocator (no
  // cudaMalloc once the sizes have been seen), or a captured step's arena.
  const int64_t gemm_offset = (plan.bytes + 255) / 256 * 256;
  const Scratch workspace(static_cast<size_t>(gemm_offset) + kGemmWorkspaceBytes, device);
  char* ws = workspace.data_as<char>();
  void* gemm_ws = ws + gemm_offset;
  cudaStream_t stream = current_stream(device);
  const Stages<T> s{p, plan, ws, stream};
  // The GEMM switch, read once for the layer's six GEMM choices.
  const GemmRequest request = cuda_switches().gemm;
  auto run_gemm = [&](const void* a, const decoder::Projection& w, int64_t d) {
    run_gemm_cuda(gemm(p, a, w, ws + d), request, gemm_ws, kGemmWorkspaceBytes, stream, device);
  };

  auto skinny = [request](const GemmCall& call) {
    return choose_gemm_kernel(call, request) == GemmKernel::kSkinny;
  };
  auto run = [&](const GemmCall& call) {
    run_gemm_cuda(call, request, gemm_ws, kGemmWorkspaceBytes, stream, device);
  };
  // Where the skinny kernel runs the GEMMs (a decode step's few rows), the norms, the MLP's
  // activation and the residual adds move into them: the GEMMs read the hidden state through
  // their norm and add their products to it, the qkv GEMM adds its bias and turns RoPE: six stages
  // per layer instead of eleven (Gemma-2's post-norms keep the residual kernel and the norm2 it
  // writes; a partial rotary embedding keeps the bias + RoPE kernel).
  const GemmNorm attn_norm = gemm_norm(p, p.attn_norm), mlp_norm = gemm_norm(p, p.mlp_norm);
  GemmCall qkv = gemm(p, p.hidden, p.qkv, ws + plan.qkv);
  qkv.norm = &attn_norm;
  // The qkv bias and RoPE in the same GEMM's epilogue where every dim of a head rotates.
  const GemmRope rope{p.rope_cos_sin, p.positions, p.head_dim, p.heads_q + p.heads_kv,
                      p.rope_interleaved};
  GemmCall qkv_rope = qkv;
  qkv_rope.epilogue = GemmEpilogue::kRope;
  qkv_rope.rope = &rope;
  qkv_rope.bias = p.qkv.bias;
  const bool rope_whole = p.rope_cos_sin == nullptr || p.rope_dim == p.head_dim;
  if (rope_whole && skinny(qkv_rope)) {
    run(qkv_rope);
  } else {
    if (skinny(qkv)) {
      run(qkv);
    } else {
      s.norm1();
      run_gemm(ws + plan.normed, p.qkv, plan.qkv);
    }
    s.bias_rope();
  }
  paged::run_reshape_and_cache_cuda(decoder::cache_write_params(p, ws + plan.qkv));
  attention(p, ws + plan.qkv, ws + plan.attention, device);
  const GemmCall out = residual(p, ws + plan.attention, p.out_proj);
  const GemmCall normed_up = activated_up(p, p.hidden, ws + plan.activated, &mlp_norm);
  const GemmCall up = activated_up(p, ws + plan.normed, ws + plan.activated);
  if (p.attn_out_norm == nullptr && skinny(out) && skinny(normed_up)) {
    run(out);
    run(normed_up);
  } else {
    run_gemm(ws + plan.attention, p.out_proj, plan.projected);
    s.residual(plan.projected, p.out_proj.bias, p.attn_out_norm, /*next_norm=*/true);
    if (skinny(up)) {
      run(up);
    } else {
      run_gemm(ws + plan.normed, p.up, plan.up);
      s.activation(multiprocessor_count(device));
    }
  }
  const GemmCall down = residual(p, ws + plan.activated, p.down);
  if (p.mlp_out_norm == nullptr && skinny(down)) {
    run(down);
  } else {
    run_gemm(ws + plan.activated, p.down, plan.projected);
    s.residual(plan.projected, p.down.bias, p.mlp_out_norm, /*next_norm=*/false);
  }
}

}  // namespace

void run_decoder_layer_cuda(const decoder::DecoderLayerParams& p) {
  if (p.num_tokens == 0) return;
  const int device = device_of(p.hidden);
  DeviceGuard guard(device);
  switch (p.dtype) {
    case ElementType::kFloat32: return run_typed<float>(p, device);
    case ElementType::kFloat16: return run_typed<__half>(p, device);
    case ElementType::kBFloat16: return run_typed<__nv_bfloat16>(p, device);
  }
}

}  // namespace djl_attn::cuda
