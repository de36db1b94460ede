#include "decoder/decoder_layer_op.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::decoder {
namespace {

constexpr const char* kOp = "decoder_layer";

// A float32 vector parameter [n] (norm weights and biases, projection biases).
void check_vector(const Tensor& t, const char* arg, int64_t n, const char* n_from,
                  const Tensor& hidden) {
  const ArgName name{kOp, arg};
  check_dim(t, name, 1, "[n]");
  check_size(t, name, 0, "n", n, n_from);
  check_dtype(t, name, DType::kFloat32);
  check_same_device(t, name, hidden, {kOp, "hidden"});
  check_contiguous(t, name);
}

const float* optional_vector(const std::optional<Tensor>& t, const char* arg, int64_t n,
                             const char* n_from, const Tensor& hidden) {
  if (!t) return nullptr;
  check_vector(*t, arg, n, n_from, hidden);
  return t->data_as<float>();
}

// A weight matrix [rows, cols] in the stream's dtype, contiguous.
void check_matrix(const Tensor& t, const char* arg, int64_t rows, const char* rows_from,
                  int64_t cols, const char* cols_from, const Tensor& hidden) {
  const ArgName name{kOp, arg};
  check_dim(t, name, 2, "[out, in]");
  check_size(t, name, 0, "out", rows, rows_from);
  check_size(t, name, 1, "in", cols, cols_from);
  check_same_dtype(t, name, hidden, {kOp, "hidden"});
  check_same_device(t, name, hidden, {kOp, "hidden"});
  check_contiguous(t, name);
}

NormWeights check_norm(const Tensor& weight, const std::optional<Tensor>& bias,
                       const char* weight_arg, const char* bias_arg, NormType type, int64_t c,
                       const Tensor& hidden) {
  check_vector(weight, weight_arg, c, "the hidden size C of hidden", hidden);
  if (bias && type == NormType::kRms) {
    fail_invalid(kOp, ": ", bias_arg, ": expected None for RMSNorm (norm_type 0), got a tensor");
  }
  return {weight.data_as<float>(),
          optional_vector(bias, bias_arg, c, "the hidden size C of hidden", hidden)};
}

}  // namespace

void decoder_layer_boxed(shim::StableIValue* stack, const DecoderBackend& backend) {
  Tensor hidden = take_tensor(stack, 0);
  Tensor positions = take_tensor(stack, 1);
  Tensor key_cache = take_tensor(stack, 2);
  Tensor value_cache = take_tensor(stack, 3);
  Tensor block_tables = take_tensor(stack, 4);
  Tensor cu_seqlens_q = take_tensor(stack, 5);
  Tensor context_lens = take_tensor(stack, 6);
  Tensor slot_mapping = take_tensor(stack, 7);
  std::optional<Tensor> k_scale = take_optional_tensor(stack, 8);
  std::optional<Tensor> v_scale = take_optional_tensor(stack, 9);
  Tensor attn_norm_weight = take_tensor(stack, 10);
  std::optional<Tensor> attn_norm_bias = take_optional_tensor(stack, 11);
  Tensor qkv_weight = take_tensor(stack, 12);
  std::optional<Tensor> qkv_bias = take_optional_tensor(stack, 13);
  std::optional<Tensor> rope_cos_sin = take_optional_tensor(stack, 14);
  Tensor out_weight = take_tensor(stack, 15);
  std::optional<Tensor> out_bias = take_optional_tensor(stack, 16);
  std::optional<Tensor> attn_out_norm_weight = take_optional_tensor(stack, 17);
  Tensor mlp_norm_weight = take_tensor(stack, 18);
  std::optional<Tensor> mlp_norm_bias = take_optional_tensor(stack, 19);
  Tensor up_weight = take_tensor(stack, 20);
  std::optional<Tensor> up_bias = take_optional_tensor(stack, 21);
  Tensor down_weight = take_tensor(stack, 22);
  std::optional<Tensor> down_bias = take_optional_tensor(stack, 23);
  std::optional<Tensor> mlp_out_norm_weight = take_optional_tensor(stack, 24);
  const int64_t num_heads = read_int(stack, 25);
  const int64_t norm_type = read_int(stack, 26);
  const int64_t activation = read_int(stack, 27);
  const double norm_eps = read_float(stack, 28);
  const double scale = read_float(stack, 29);
  const int64_t window_left = read_int(stack, 30);
  const double softcap = read_float(stack, 31);
  const bool rope_interleaved = read_bool(stack, 32);
  const bool check_indices = read_bool(stack, 33);
  const int64_t max_seqlen_q_arg = read_int(stack, 34);
  const bool fresh_chunks = read_bool(stack, 35);
  const bool fp8_e5m2 = read_bool(stack, 36);

  // The stream: [T, C], contiguous, of a kernel dtype.
  const ArgName hn{kOp, "hidden"};
  const auto [tokens, c] = check_stream(hidden, hn);
  if (backend.run == nullptr) {
    fail_invalid(hn.prefix(), ": expected a tensor on a device with a decoder_layer kernel "
                 "(CPU or CUDA), got ", hidden.device().str());
  }
  if (c < 1) fail_invalid(hn.prefix(), ": expected a hidden size C >= 1, got ", c);

  // Enums and scalars.
  if (norm_type < 0 || norm_type >= kNumNormTypes) {
    fail_invalid(kOp, ": norm_type: expected 0 (RMSNorm) or 1 (LayerNorm), got ", norm_type);
  }
  if (activation < 0 || activation >= kNumActivations) {
    fail_invalid(kOp, ": activation: expected 0 (SwiGLU), 1 (GeGLU, tanh) or 2 (GELU, tanh), "
                 "got ", activation);
  }
  if (!std::isfinite(norm_eps) || norm_eps < 0) {
    fail_invalid(kOp, ": norm_eps: expected a finite value >= 0, got ", norm_eps);
  }
  check_qk_scale(kOp, scale);
  check_window_size({kOp, "window_left"}, window_left);
  const float cap = checked_softcap(kOp, softcap);
  const NormType norm = static_cast<NormType>(norm_type);
  const Activation act = static_cast<Activation>(activation);

  // The cache and the batch.
  const paged::CacheType cache_type =
      paged::check_caches(kOp, key_cache, value_cache, hidden, hn, true, fp8_e5m2);
  const paged::CacheScale ks = paged::check_scale(kOp, "k_scale", k_scale, key_cache, cache_type);
  const paged::CacheScale vs = paged::check_scale(kOp, "v_scale", v_scale, key_cache, cache_type);
  const int64_t heads_kv = key_cache.size(2), dim = key_cache.size(3);
  if (!paged::is_supported_head_dim(dim)) {
    fail_invalid(kOp, ": key_cache: expected a head dim D in [1, ", paged::kMaxHeadDim, "], got ",
                 dim);
  }
  if (num_heads < 1 || num_heads % heads_kv != 0) {
    fail_invalid(kOp, ": num_heads: expected a multiple >= 1 of the cache's heads Hkv = ",
                 heads_kv, ", got ", num_heads);
  }
  paged::check_index_tensor(kOp, positions, "positions", 1, "[T]", DType::kInt64, hidden,
                            "hidden");
  check_size(positions, {kOp, "positions"}, 0, "T", tokens, "the rows of hidden");
  paged::check_index_tensor(kOp, context_lens, "context_lens", 1, "[num_seqs]", DType::kInt32,
                            hidden, "hidden");
  const int64_t num_seqs = context_lens.size(0);
  paged::check_index_tensor(kOp, block_tables, "block_tables", 2, "[num_seqs, max_blocks]",
                            DType::kInt32, hidden, "hidden");
  check_size(block_tables, {kOp, "block_tables"}, 0, "num_seqs", num_seqs,
             "the sequences of context_lens");
  paged::check_index_tensor(kOp, cu_seqlens_q, "cu_seqlens_q", 1, "[num_seqs + 1]",
                            DType::kInt32, hidden, "hidden");
  check_size(cu_seqlens_q, {kOp, "cu_seqlens_q"}, 0, "num_seqs + 1", num_seqs + 1,
             "the sequences of context_lens plus one");
  paged::check_index_tensor(kOp, slot_mapping, "slot_mapping", 1, "[T]", DType::kInt64, hidden,
                            "hidden");
  check_size(slot_mapping, {kOp, "slot_mapping"}, 0, "T", tokens, "the rows of hidden");

  // The weights.
  const int64_t q_width = num_heads * dim, qkv_rows = (num_heads + 2 * heads_kv) * dim;
  const char* kC = "the hidden size C of hidden";
  const NormWeights attn_norm =
      check_norm(attn_norm_weight, attn_norm_bias, "attn_norm_weight", "attn_norm_bias", norm, c,
                 hidden);
  check_matrix(qkv_weight, "qkv_weight", qkv_rows, "(Hq + 2 Hkv) D", c, kC, hidden);
  const float* qkv_b = optional_vector(qkv_bias, "qkv_bias", qkv_rows, "(Hq + 2 Hkv) D", hidden);
  int64_t rope_dim = 0, rope_positions = 0;
  if (rope_cos_sin) {
    const ArgName rn{kOp, "rope_cos_sin"};
    check_dim(*rope_cos_sin, rn, 2, "[P, R]");
    check_dtype(*rope_cos_sin, rn, DType::kFloat32);
    check_same_device(*rope_cos_sin, rn, hidden, hn);
    check_contiguous(*rope_cos_sin, rn);
    rope_positions = rope_cos_sin->size(0);
    rope_dim = rope_cos_sin->size(1);
    if (rope_dim < 2 || rope_dim % 2 != 0 || rope_dim > dim) {
      fail_invalid(rn.prefix(), ": expected an even rotary width R in [2, D = ", dim,
                   "] (cos then sin of R/2 frequencies), got ", rope_dim);
    }
  }
  check_matrix(out_weight, "out_weight", c, kC, q_width, "Hq D", hidden);
  const float* out_b = optional_vector(out_bias, "out_bias", c, kC, hidden);
  const float* attn_out_norm =
      optional_vector(attn_out_norm_weight, "attn_out_norm_weight", c, kC, hidden);
  const NormWeights mlp_norm =
      check_norm(mlp_norm_weight, mlp_norm_bias, "mlp_norm_weight", "mlp_norm_bias", norm, c,
                 hidden);
  const ArgName un{kOp, "up_weight"};
  check_dim(up_weight, un, 2, "[out, in]");
  const int64_t up_rows = up_weight.size(0);
  const bool gated = is_gated(act);
  if (up_rows < 1 || (gated && up_rows % 2 != 0)) {
    fail_invalid(un.prefix(), gated ? ": expected 2 I >= 2 rows (gate rows, then up rows) for a "
                                      "gated activation, got "
                                    : ": expected I >= 1 rows, got ",
                 up_rows);
  }
  const int64_t inter = gated ? up_rows / 2 : up_rows;
  check_matrix(up_weight, "up_weight", up_rows, "the rows of up_weight", c, kC, hidden);
  const float* up_b = optional_vector(up_bias, "up_bias", up_rows, "the rows of up_weight",
                                      hidden);
  check_matrix(down_weight, "down_weight", c, kC, inter, "the intermediate size I of up_weight",
               hidden);
  const float* down_b = optional_vector(down_bias, "down_bias", c, kC, hidden);
  const float* mlp_out_norm =
      optional_vector(mlp_out_norm_weight, "mlp_out_norm_weight", c, kC, hidden);

  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const int64_t max_blocks = block_tables.size(1);
  // The longest chunk: given by the caller (Java's PagedBatch knows it) or T, an upper bound.
  // CUDA takes the tuned decode kernels only when it is 1, so a vouched decode step passes it.
  if (max_seqlen_q_arg < -1 || max_seqlen_q_arg > tokens) {
    fail_invalid(kOp, ": max_seqlen_q: expected -1 (not given: T) or a value in [0, T = ", tokens,
                 "], got ", max_seqlen_q_arg);
  }
  int64_t max_seqlen_q = max_seqlen_q_arg >= 0 ? max_seqlen_q_arg : tokens;
  // The positions are checked whenever that costs no device synchronisation: with the batch, and
  // on every CPU call (the batch's once-per-step check, Java's PagedBatch, does not cover them,
  // and a position beyond the rotary table would read outside it). A vouched CUDA call
  // (check_indices false) reads nothing back: a captured step cannot, and a per-layer wait is
  // what the fused layer exists to remove; its caller vouches for the positions too.
  const bool on_cpu = hidden.device().type == DeviceType::kCpu;
  if (check_indices || on_cpu) {
    const bool batch = check_indices;
    std::vector<int64_t> pos = paged::host_buffer<int64_t>(positions);
    std::vector<int32_t> lens, tables, cu;
    std::vector<int64_t> slots;
    std::vector<float> k_scales, v_scales;
    if (batch) {
      lens = paged::host_buffer<int32_t>(context_lens);
      tables = paged::host_buffer<int32_t>(block_tables);
      cu = paged::host_buffer<int32_t>(cu_seqlens_q);
      slots = paged::host_buffer<int64_t>(slot_mapping);
      k_scales = paged::scale_buffer(k_scale);
      v_scales = paged::scale_buffer(v_scale);
    }
    const paged::HostCopy none{nullptr, nullptr, 0};
    // One batched copy (one wait on a device) for every value checked.
    paged::copy_to_host(
        backend.copy_to_host,
        {paged::copy_into(pos, positions), batch ? paged::copy_into(lens, context_lens) : none,
         batch ? paged::copy_into(tables, block_tables) : none,
         batch ? paged::copy_into(cu, cu_seqlens_q) : none,
         batch ? paged::copy_into(slots, slot_mapping) : none,
         batch ? paged::copy_scale(k_scales, k_scale) : none,
         batch ? paged::copy_scale(v_scales, v_scale) : none});
    for (int64_t t = 0; t < tokens && rope_cos_sin; ++t) {
      if (pos[t] < 0 || pos[t] >= rope_positions) {
        fail_invalid(kOp, ": positions: expected values in [0, P = ", rope_positions,
                     ") (the rows of rope_cos_sin), got ", pos[t], " at index ", t);
      }
    }
    if (batch) {
      paged::check_scale_values(kOp, "k_scale", k_scales);
      paged::check_scale_values(kOp, "v_scale", v_scales);
      paged::check_block_tables(kOp, lens, tables, max_blocks, block_size, num_blocks);
      paged::check_chunks(kOp, cu, lens, tokens, max_seqlen_q);
      for (int64_t s = 0; s < num_seqs && fresh_chunks; ++s) {
        if (lens[s] != cu[s + 1] - cu[s]) {
          fail_invalid(kOp, ": fresh_chunks: expected every sequence's chunk to be its whole "
                       "context (nothing cached before it), got a context of ", lens[s],
                       " tokens for a chunk of ", cu[s + 1] - cu[s], " at sequence ", s);
        }
        // A chunk of one reads its token back from an fp8 cache (decoder_layer_attention.h);
        // the flash kernel of fresh chunks attends the rows as computed.
        if (cache_type != paged::CacheType::kQuery && cu[s + 1] - cu[s] < 2) {
          fail_invalid(kOp, ": fresh_chunks: expected chunks of at least 2 tokens on an fp8 "
                       "cache (a chunk of one reads its token back from the cache), got ",
                       cu[s + 1] - cu[s], " at sequence ", s);
        }
      }
      max_seqlen_q = 0;
      for (int64_t s = 0; s < num_seqs; ++s) {
        max_seqlen_q = std::max<int64_t>(max_seqlen_q, cu[s + 1] - cu[s]);
      }
      paged::check_slots(kOp, slots.data(), tokens, num_blocks * block_size);
    }
  }
  if (tokens == 0) return;

  DecoderLayerParams p{};
  p.hidden = hidden.data();
  p.positions = positions.data_as<int64_t>();
  PagedCacheView& v = p.cache;
  v.kv = paged::paged_kv(key_cache, value_cache, &block_tables, &context_lens, cache_type, ks, vs);
  v.cu_seqlens_q = cu_seqlens_q.data_as<int32_t>();
  v.slot_mapping = slot_mapping.data_as<int64_t>();
  v.num_seqs = num_seqs;
  v.max_seqlen_q = max_seqlen_q;
  v.fresh_chunks = fresh_chunks;
  p.attn_norm = attn_norm;
  p.qkv = {qkv_weight.data(), qkv_b, qkv_rows, c};
  p.rope_cos_sin = rope_cos_sin ? rope_cos_sin->data_as<float>() : nullptr;
  p.out_proj = {out_weight.data(), out_b, c, q_width};
  p.attn_out_norm = attn_out_norm;
  p.mlp_norm = mlp_norm;
  p.up = {up_weight.data(), up_b, up_rows, c};
  p.down = {down_weight.data(), down_b, c, inter};
  p.mlp_out_norm = mlp_out_norm;
  p.num_tokens = tokens;
  p.hidden_size = c;
  p.heads_q = num_heads;
  p.heads_kv = heads_kv;
  p.head_dim = dim;
  p.intermediate = inter;
  p.rope_dim = rope_dim;
  p.rope_positions = rope_positions;
  p.rope_interleaved = rope_interleaved;
  p.norm_type = norm;
  p.activation = act;
  p.norm_eps = static_cast<float>(norm_eps);
  p.scale = static_cast<float>(scale);
  p.window_left = window_left;
  p.softcap = cap;
  p.dtype = element_type(hidden.dtype());
  backend.run(p);
}

}  // namespace djl_attn::decoder
