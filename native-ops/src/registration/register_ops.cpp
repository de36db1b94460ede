// All djl_attn schemas, and the CPU kernels, registered when the library is loaded.
//
// Schemas are defined here whether or not a kernel exists yet: a missing kernel then fails
// with PyTorch's own "could not run ... with the CPU backend" rather than an unknown operator.

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "bert/bert_cpu.h"
#include "common/error.h"
#include "decoder/decoder_layer_cpu.h"
#include "encoder/encoder_layer_cpu.h"
#include "djl_attn/c_api.h"
#include "flash/flash_cpu.h"
#include "flash/flash_fp8_cpu.h"
#include "linear/causal_dot_product_cpu.h"
#include "paged/paged_cpu.h"
#include "registration/operator_kernels.h"
#include "registration/registration.h"
#include "step/step_cpu.h"
#include "sampling/sample_tokens_cpu.h"

namespace djl_attn {
namespace {

// Names fixed; argument lists may grow, never silently change meaning (see docs/operators.md).
constexpr const char* kSchemas[] = {
    "flash_attention(Tensor q, Tensor k, Tensor v, Tensor? kv_lens, float scale, bool causal,"
    " int window_left=-1, int window_right=-1, float softcap=0., Tensor? alibi_slopes=None)"
    " -> (Tensor, Tensor)",
    "flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,"
    " Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float scale, bool causal,"
    " int window_left=-1, int window_right=-1, float softcap=0., Tensor? alibi_slopes=None)"
    " -> (Tensor, Tensor)",
    // FlashAttention-3's FP8 forward: e4m3fn q, k, v (float8_e4m3fn or uint8) with descales.
    "flash_attention_fp8(Tensor q, Tensor k, Tensor v, Tensor? kv_lens, float scale, bool causal,"
    " Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None,"
    " bool out_float16=False) -> (Tensor, Tensor)",
    "bert_attention(Tensor qkv, Tensor? qkv_bias, Tensor? kv_lens, int num_heads, float scale)"
    " -> Tensor",
    "add_bias_residual_layernorm(Tensor x, Tensor? bias, Tensor residual, Tensor gamma,"
    " Tensor beta, float eps) -> Tensor",
    "add_bias_gelu(Tensor x, Tensor? bias, bool tanh_approximation) -> Tensor",
    "reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache,"
    " Tensor slot_mapping, bool check_slots=True, Tensor? k_scale=None, Tensor? v_scale=None,"
    " bool fp8_e5m2=False) -> ()",
    "paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables,"
    " Tensor context_lens, float scale, int max_context_len, Tensor? alibi_slopes,"
    " bool check_indices=True, Tensor? k_scale=None, Tensor? v_scale=None, int window_left=-1,"
    " float softcap=0., bool fp8_e5m2=False) -> Tensor",
    "causal_dot_product(Tensor q, Tensor k, Tensor v) -> Tensor",
    "paged_prefill_attention(Tensor query, Tensor key_cache, Tensor value_cache,"
    " Tensor block_tables, Tensor cu_seqlens_q, Tensor context_lens, float scale,"
    " int max_seqlen_q, Tensor? alibi_slopes, bool check_indices=True, Tensor? k_scale=None,"
    " Tensor? v_scale=None, int window_left=-1, float softcap=0., bool causal=True,"
    " int window_right=-1, Tensor? key=None, Tensor? value=None, bool fp8_e5m2=False)"
    " -> Tensor",
    "add_bias_residual_affine(Tensor x, Tensor? bias, Tensor residual, Tensor scale,"
    " Tensor shift) -> Tensor",
    "remove_padding(Tensor x, Tensor lens) -> (Tensor, Tensor)",
    "restore_padding(Tensor packed, Tensor cu_seqlens, int seqlen) -> Tensor",
    // One whole pre-norm decoder layer over a paged KV cache (docs/design/fused-decoder-layer.md).
    "decoder_layer(Tensor(a!) hidden, Tensor positions, Tensor(b!) key_cache,"
    " Tensor(c!) value_cache, Tensor block_tables, Tensor cu_seqlens_q, Tensor context_lens,"
    " Tensor slot_mapping, Tensor? k_scale, Tensor? v_scale, Tensor attn_norm_weight,"
    " Tensor? attn_norm_bias, Tensor qkv_weight, Tensor? qkv_bias, Tensor? rope_cos_sin,"
    " Tensor out_weight, Tensor? out_bias, Tensor? attn_out_norm_weight,"
    " Tensor mlp_norm_weight, Tensor? mlp_norm_bias, Tensor up_weight, Tensor? up_bias,"
    " Tensor down_weight, Tensor? down_bias, Tensor? mlp_out_norm_weight, int num_heads,"
    " int norm_type, int activation, float norm_eps, float scale, int window_left,"
    " float softcap, bool rope_interleaved, bool check_indices=True, int max_seqlen_q=-1,"
    " bool fresh_chunks=False, bool fp8_e5m2=False) -> ()",
    // The ends of a decoder step around decoder_layer, writing into the caller's arrays
    // (docs/design/captured-decode-step.md).
    "embed_tokens(Tensor(a!) hidden, Tensor token_ids, Tensor embedding, Tensor? positions,"
    " Tensor? position_embedding, float scale, bool check_indices=True) -> ()",
    "decoder_head(Tensor(a!) logits, Tensor hidden, Tensor? rows, Tensor norm_weight,"
    " Tensor? norm_bias, Tensor head_weight, int norm_type, float norm_eps, float softcap,"
    " bool check_indices=True) -> ()",
    "copy_from_host(Tensor(a!) dst, Tensor src) -> ()",
    // A step's calls captured once into a CUDA graph and replayed as one launch (same note).
    "cuda_graph_measure_begin(Tensor anchor) -> ()",
    "cuda_graph_measure_end(Tensor anchor) -> Tensor",
    "cuda_graph_capture_begin(Tensor(a!) arena) -> ()",
    "cuda_graph_capture_end(Tensor arena) -> Tensor",
    "cuda_graph_replay(Tensor(a!) arena, int graph) -> ()",
    "cuda_graph_release(Tensor arena, int graph) -> ()",
    // One token id per row of logits, greedy or sampled on the device (docs/operators.md).
    "sample_tokens(Tensor(a!) ids, Tensor logits, Tensor temperature, Tensor top_k,"
    " Tensor top_p, Tensor seeds, Tensor offsets) -> ()",
    // One whole post-norm BERT encoder layer over packed tokens, and the weights it takes packed
    // once (docs/design/fused-encoder-layer.md).
    "encoder_layer(Tensor(a!) hidden, Tensor cu_seqlens, int max_seqlen, Tensor qkv_weight,"
    " Tensor qkv_bias, Tensor out_weight, Tensor out_bias, Tensor attn_norm_weight,"
    " Tensor attn_norm_bias, Tensor up_weight, Tensor up_bias, Tensor down_weight,"
    " Tensor down_bias, Tensor ffn_norm_weight, Tensor ffn_norm_bias, int num_heads,"
    " float norm_eps, float scale, bool gelu_tanh) -> ()",
    "gemm_pack_weight(Tensor weight, int mode) -> Tensor",
};

// The CPU backend's device functions; operator_kernels.h makes the boxed kernels from them.
const OperatorBackends kCpuBackends{
    {flash::run_flash_attention_cpu, nullptr, flash::run_flash_attention_fp8_cpu},
    {linear::run_causal_dot_product_cpu},
    {bert::run_layernorm_cpu, bert::run_elementwise_cpu, bert::run_remove_padding_cpu,
     bert::run_restore_padding_cpu, nullptr, nullptr},
    {paged::run_reshape_and_cache_cpu, paged::run_paged_attention_cpu,
     paged::run_paged_prefill_cpu, nullptr},
    {decoder::run_decoder_layer_cpu, nullptr},
    {step::run_embed_tokens_cpu, step::run_decoder_head_cpu, step::copy_from_host_cpu, nullptr},
    {},  // no CUDA graphs on the CPU: the graph bindings refuse CPU tensors by name
    {sampling::run_sample_tokens_cpu, nullptr, nullptr},
    {encoder::run_encoder_layer_cpu, true},
};

// Each schema has its kernel in the one list.
static_assert(sizeof(operator_kernels<kCpuBackends>) / sizeof(KernelEntry) ==
              sizeof(kSchemas) / sizeof(kSchemas[0]));

struct RegisteredKernel {
  std::string dispatch_key;
  std::string name;
  shim::BoxedKernel fn;
};

struct RegistrationState {
  std::mutex mutex;
  bool defined = false;   // the namespace is defined in this process
  bool ours = false;      // ... by this copy of the library
  std::string message;    // why it is not defined
  // What this copy registered, under its own lock: the CPU kernels are registered while
  // `mutex` is held by the load-time constructor.
  std::mutex kernels_mutex;
  std::vector<RegisteredKernel> kernels;
};

RegistrationState& state() {
  static RegistrationState instance;
  return instance;
}

void check(shim::AOTITorchError code, const std::string& what) {
  if (code != 0) fail_native("registering djl_attn operators: ", what, " failed (error ", code, ")");
}

void define_schemas() {
  const auto& api = shim::torch();
  shim::TorchLibraryHandle library = nullptr;
  // A second copy of this library (another path, another class loader) finds the namespace
  // taken: torch rejects a second definition, and that copy then registers nothing.
  if (api.library_init_def("djl_attn", __FILE__, __LINE__, &library) != 0) {
    state().defined = true;
    state().ours = false;
    return;
  }
  for (const char* schema : kSchemas) check(api.library_def(library, schema), schema);
  // The library object stays alive for the life of the process: deleting it would unregister.
  state().defined = true;
  state().ours = true;
  register_operator_kernels<kCpuBackends>("CPU");
}

// Runs once when the shared library is loaded (dlopen from Java or torch.ops.load_library).
struct RegisterAtLoad {
  RegisterAtLoad() {
    std::lock_guard<std::mutex> lock(state().mutex);
    try {
      define_schemas();
    } catch (const std::exception& e) {
      // A throw out of a load-time constructor would abort the host process.
      state().message = e.what();
      std::fprintf(stderr, "djl_attn: operators not registered: %s\n", e.what());
    }
  }
} register_at_load;

}  // namespace

bool operators_registered(std::string* message) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().defined && message != nullptr) *message = state().message;
  return state().defined;
}

void put_undefined_outputs(shim::StableIValue* stack, uint64_t num_outputs) {
  for (uint64_t i = 0; i < num_outputs; ++i) {
    shim::AtenTensorHandle undefined = nullptr;
    if (shim::torch().new_uninitialized_tensor(&undefined) != 0) {
      fail_native("new_uninitialized_tensor failed for a rejected call's output ", i);
    }
    stack[i] = reinterpret_cast<shim::StableIValue>(undefined);
  }
}

void register_kernels(const char* dispatch_key, const KernelEntry* kernels, int count) {
  if (!state().ours) return;
  const auto& api = shim::torch();
  shim::TorchLibraryHandle library = nullptr;
  check(api.library_init_impl("djl_attn", dispatch_key, __FILE__, __LINE__, &library),
        std::string("library_init_impl(") + dispatch_key + ")");
  for (int i = 0; i < count; ++i) {
    check(api.library_impl(library, kernels[i].name, kernels[i].fn), kernels[i].name);
    std::lock_guard<std::mutex> lock(state().kernels_mutex);
    state().kernels.push_back({dispatch_key, kernels[i].name, kernels[i].fn});
  }
}

shim::BoxedKernel registered_kernel(const char* dispatch_key, const char* name) {
  std::lock_guard<std::mutex> lock(state().kernels_mutex);
  for (const RegisteredKernel& k : state().kernels) {
    if (k.dispatch_key == dispatch_key && k.name == name) return k.fn;
  }
  return nullptr;
}

namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(' ') - begin + 1);
}

// "Tensor q", "Tensor? kv_lens", "Tensor(a!) key_cache", "float scale", ...
int32_t argument_kind(const std::string& argument, const char* schema) {
  const std::string type = argument.substr(0, argument.find(' '));
  if (type == "Tensor?") return DJL_ATTN_ARG_OPTIONAL_TENSOR;
  if (type.rfind("Tensor", 0) == 0) return DJL_ATTN_ARG_TENSOR;  // Tensor, Tensor(a!)
  if (type == "int") return DJL_ATTN_ARG_INT;
  if (type == "float") return DJL_ATTN_ARG_FLOAT;
  if (type == "bool") return DJL_ATTN_ARG_BOOL;
  // Schemas use only the five types above (the C interface has a kind for each).
  fail_native("schema ", schema, ": unsupported argument type '", type, "'");
}

OperatorSignature parse_schema(const char* schema) {
  const std::string s = schema;
  // The argument list's closing parenthesis: "Tensor(a!)" nests one level.
  const size_t open = s.find('(');
  size_t close = open;
  for (int depth = 0; close < s.size(); ++close) {
    if (s[close] == '(') ++depth;
    if (s[close] == ')' && --depth == 0) break;
  }
  const size_t arrow = s.find("->", close);
  OperatorSignature sig;
  sig.name = s.substr(0, open);
  sig.qualified_name = "djl_attn::" + sig.name;
  sig.schema = s;
  const std::string args = s.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start < args.size()) {
    size_t comma = args.find(',', start);
    if (comma == std::string::npos) comma = args.size();
    const std::string argument = trim(args.substr(start, comma - start));
    if (!argument.empty()) sig.arg_kinds.push_back(argument_kind(argument, schema));
    start = comma + 1;
  }
  // "-> ()", "-> Tensor", "-> (Tensor, Tensor)"
  const std::string returns = trim(s.substr(arrow + 2));
  if (returns == "()") {
    sig.num_outputs = 0;
  } else {
    sig.num_outputs = 1;
    for (char c : returns) sig.num_outputs += c == ',' ? 1 : 0;
  }
  if (sig.arg_kinds.size() > kMaxStackSlots) {
    fail_native("schema ", schema, ": ", sig.arg_kinds.size(), " arguments, the C interface's ",
                "stack holds ", kMaxStackSlots);
  }
  return sig;
}

}  // namespace

const std::vector<OperatorSignature>& operator_signatures() {
  static const std::vector<OperatorSignature> signatures = [] {
    std::vector<OperatorSignature> out;
    for (const char* schema : kSchemas) out.push_back(parse_schema(schema));
    return out;
  }();
  return signatures;
}

const OperatorSignature* find_operator(const char* name) {
  for (const OperatorSignature& sig : operator_signatures()) {
    if (sig.name == name) return &sig;
  }
  return nullptr;
}

}  // namespace djl_attn
