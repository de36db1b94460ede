#include "step/step_ops.h"

#include <cmath>
#include <optional>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::step {
namespace {

// A table [rows, C] in the stream's dtype, on its device, contiguous.
void check_table(const Tensor& t, ArgName name, const char* layout, int64_t c, const Tensor& ref,
                 ArgName ref_name) {
  check_dim(t, name, 2, layout);
  check_size(t, name, 1, "C", c, "the hidden size C");
  check_same_dtype(t, name, ref, ref_name);
  check_same_device(t, name, ref, ref_name);
  check_contiguous(t, name);
}

// Values of an int64 index tensor in [0, bound), read back to the host.
void check_range(const char* op, const char* arg, const std::vector<int64_t>& values,
                 int64_t bound, const char* bound_name) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= bound) {
      fail_invalid(op, ": ", arg, ": expected values in [0, ", bound_name, " = ", bound,
                   "), got ", values[i], " at index ", i);
    }
  }
}

}  // namespace

void embed_tokens_boxed(shim::StableIValue* stack, const StepBackend& backend) {
  constexpr const char* kOp = "embed_tokens";
  Tensor hidden = take_tensor(stack, 0);
  Tensor token_ids = take_tensor(stack, 1);
  Tensor embedding = take_tensor(stack, 2);
  std::optional<Tensor> positions = take_optional_tensor(stack, 3);
  std::optional<Tensor> position_embedding = take_optional_tensor(stack, 4);
  const double scale = read_float(stack, 5);
  const bool check_indices = read_bool(stack, 6);

  const ArgName hn{kOp, "hidden"};
  const auto [tokens, c] = check_stream(hidden, hn);
  paged::check_index_tensor(kOp, token_ids, "token_ids", 1, "[T]", DType::kInt64, hidden,
                            "hidden");
  check_size(token_ids, {kOp, "token_ids"}, 0, "T", tokens, "the rows of hidden");
  check_table(embedding, {kOp, "embedding"}, "[V, C]", c, hidden, hn);
  const int64_t vocab = embedding.size(0);
  if (positions.has_value() != position_embedding.has_value()) {
    fail_invalid(kOp, ": positions: expected a tensor exactly when position_embedding is given "
                 "(GPT-2's learned positions), got ", positions ? "a tensor" : "None", " with ",
                 position_embedding ? "a" : "no", " position_embedding");
  }
  int64_t num_positions = 0;
  if (positions) {
    paged::check_index_tensor(kOp, *positions, "positions", 1, "[T]", DType::kInt64, hidden,
                              "hidden");
    check_size(*positions, {kOp, "positions"}, 0, "T", tokens, "the rows of hidden");
    check_table(*position_embedding, {kOp, "position_embedding"}, "[P, C]", c, hidden, hn);
    num_positions = position_embedding->size(0);
  }
  const float scale_f = static_cast<float>(scale);
  if (!std::isfinite(scale) || !std::isfinite(scale_f)) {
    fail_invalid(kOp, ": scale: expected a finite float32 value, got ", scale);
  }
  // Ids index a table: checked unless a caller vouches for them (a captured step, whose ids the
  // sampler chose); on the CPU the check reads no device memory and always runs.
  const bool on_cpu = hidden.device().type == DeviceType::kCpu;
  if ((check_indices || on_cpu) && tokens > 0) {
    std::vector<int64_t> ids = paged::host_buffer<int64_t>(token_ids);
    std::vector<int64_t> pos = positions ? paged::host_buffer<int64_t>(*positions)
                                         : std::vector<int64_t>{};
    const paged::HostCopy none{nullptr, nullptr, 0};
    paged::copy_to_host(backend.copy_to_host,
                        {paged::copy_into(ids, token_ids),
                         positions ? paged::copy_into(pos, *positions) : none});
    check_range(kOp, "token_ids", ids, vocab, "V, the rows of embedding");
    if (positions) check_range(kOp, "positions", pos, num_positions, "P, the rows of "
                               "position_embedding");
  }
  if (tokens == 0) return;

  EmbedParams p{};
  p.hidden = hidden.data();
  p.token_ids = token_ids.data_as<int64_t>();
  p.embedding = embedding.data();
  p.positions = positions ? positions->data_as<int64_t>() : nullptr;
  p.position_embedding = position_embedding ? position_embedding->data() : nullptr;
  p.tokens = tokens;
  p.hidden_size = c;
  p.vocab = vocab;
  p.num_positions = num_positions;
  p.scale = scale_f;
  p.dtype = element_type(hidden.dtype());
  backend.embed(p);
}

void decoder_head_boxed(shim::StableIValue* stack, const StepBackend& backend) {
  constexpr const char* kOp = "decoder_head";
  Tensor logits = take_tensor(stack, 0);
  Tensor hidden = take_tensor(stack, 1);
  std::optional<Tensor> rows = take_optional_tensor(stack, 2);
  Tensor norm_weight = take_tensor(stack, 3);
  std::optional<Tensor> norm_bias = take_optional_tensor(stack, 4);
  Tensor head_weight = take_tensor(stack, 5);
  const int64_t norm_type = read_int(stack, 6);
  const double norm_eps = read_float(stack, 7);
  const double softcap = read_float(stack, 8);
  const bool check_indices = read_bool(stack, 9);

  const ArgName hn{kOp, "hidden"};
  const auto [tokens, c] = check_stream(hidden, hn);
  check_table(head_weight, {kOp, "head_weight"}, "[V, C]", c, hidden, hn);
  const int64_t vocab = head_weight.size(0);
  int64_t num_rows = tokens;
  if (rows) {
    paged::check_index_tensor(kOp, *rows, "rows", 1, "[R]", DType::kInt64, hidden, "hidden");
    num_rows = rows->size(0);
  }
  const ArgName ln{kOp, "logits"};
  check_dim(logits, ln, 2, "[R, V]");
  check_size(logits, ln, 0, "R", num_rows, rows ? "the values of rows" : "the rows of hidden");
  check_size(logits, ln, 1, "V", vocab, "the rows of head_weight");
  check_dtype(logits, ln, DType::kFloat32);
  check_same_device(logits, ln, hidden, hn);
  check_contiguous(logits, ln);
  for (const Tensor* t : {&norm_weight, norm_bias ? &*norm_bias : nullptr}) {
    if (t == nullptr) continue;
    const ArgName name{kOp, t == &norm_weight ? "norm_weight" : "norm_bias"};
    check_dim(*t, name, 1, "[C]");
    check_size(*t, name, 0, "C", c, "the hidden size C of hidden");
    check_dtype(*t, name, DType::kFloat32);
    check_same_device(*t, name, hidden, hn);
    check_contiguous(*t, name);
  }
  if (norm_type < 0 || norm_type >= decoder::kNumNormTypes) {
    fail_invalid(kOp, ": norm_type: expected 0 (RMSNorm) or 1 (LayerNorm), got ", norm_type);
  }
  if (norm_bias && norm_type == 0) {
    fail_invalid(kOp, ": norm_bias: expected None for RMSNorm (norm_type 0), got a tensor");
  }
  if (!std::isfinite(norm_eps) || norm_eps < 0) {
    fail_invalid(kOp, ": norm_eps: expected a finite value >= 0, got ", norm_eps);
  }
  const float cap = checked_softcap(kOp, softcap);
  const bool on_cpu = hidden.device().type == DeviceType::kCpu;
  if (rows && (check_indices || on_cpu) && num_rows > 0) {
    std::vector<int64_t> values = paged::host_buffer<int64_t>(*rows);
    paged::copy_to_host(backend.copy_to_host, {paged::copy_into(values, *rows)});
    check_range(kOp, "rows", values, tokens, "T, the rows of hidden");
  }
  if (num_rows == 0) return;

  HeadParams p{};
  p.logits = logits.data_as<float>();
  p.hidden = hidden.data();
  p.rows = rows ? rows->data_as<int64_t>() : nullptr;
  p.norm = {norm_weight.data_as<float>(), norm_bias ? norm_bias->data_as<float>() : nullptr};
  p.norm_type = static_cast<decoder::NormType>(norm_type);
  p.norm_eps = static_cast<float>(norm_eps);
  p.head_weight = head_weight.data();
  p.softcap = cap;
  p.num_rows = num_rows;
  p.tokens = tokens;
  p.hidden_size = c;
  p.vocab = vocab;
  p.dtype = element_type(hidden.dtype());
  backend.head(p);
}

void copy_from_host_boxed(shim::StableIValue* stack, const StepBackend& backend) {
  constexpr const char* kOp = "copy_from_host";
  Tensor dst = take_tensor(stack, 0);
  Tensor src = take_tensor(stack, 1);
  const ArgName dn{kOp, "dst"}, sn{kOp, "src"};
  check_supported_device(dst, dn);
  check_contiguous(dst, dn);
  if (src.device().type != DeviceType::kCpu) {
    fail_invalid(sn.prefix(), ": expected a CPU tensor, got one on ", src.device().str());
  }
  check_contiguous(src, sn);
  if (src.dtype() != dst.dtype() || src.dtype() == DType::kOther) {
    fail_invalid(sn.prefix(), ": expected the dtype of dst (", dst.dtype_str(),
                 ") among int32, int64, float32, float16, bfloat16, uint8, got ", src.dtype_str());
  }
  if (src.numel() != dst.numel()) {
    fail_invalid(sn.prefix(), ": expected ", dst.numel(), " elements (those of dst), got ",
                 src.numel());
  }
  if (src.numel() == 0) return;
  const size_t bytes = static_cast<size_t>(src.numel()) * dtype_size(src.dtype());
  backend.copy_from_host(dst.data(), src.data(), bytes);
}

}  // namespace djl_attn::step
