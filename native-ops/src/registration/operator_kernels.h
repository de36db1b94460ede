// The boxed kernel of every operator for one backend, generated from the one list below: each
// backend library (CPU in register_ops.cpp, CUDA in cuda/register_cuda.cpp) states its device
// functions once, in an OperatorBackends, and registers operator_kernels<its backends>.
#pragma once

#include <cstdint>

#include "bert/bert_attention_op.h"
#include "common/call_mode.h"
#include "common/error.h"
#include "bert/bert_ops.h"
#include "decoder/decoder_layer_op.h"
#include "encoder/encoder_layer_op.h"
#include "flash/flash_fp8_op.h"
#include "flash/flash_op.h"
#include "graph/graph_ops.h"
#include "linear/causal_dot_product_op.h"
#include "paged/paged_op.h"
#include "registration/registration.h"
#include "step/step_ops.h"
#include "sampling/sample_tokens_op.h"

namespace djl_attn {

// A backend's device functions, one struct per kernel family.
struct OperatorBackends {
  flash::FlashBackend flash;  // flash_attention(_varlen, _fp8), bert_attention
  linear::CausalDotProductBackend linear;
  bert::BertBackend bert;
  paged::PagedBackend paged;
  decoder::DecoderBackend decoder;  // decoder_layer
  step::StepBackend step;           // embed_tokens, decoder_head
  graph::GraphBackend graph;        // cuda_graph_*
  sampling::SamplingBackend sampling;  // sample_tokens
  encoder::EncoderBackend encoder;  // encoder_layer, gemm_pack_weight
};

// Writes undefined tensors to a rejected call's outputs, so that the dispatcher, which reads
// every output back, finds valid handles (common/call_mode.h).
void put_undefined_outputs(shim::StableIValue* stack, uint64_t num_outputs);

// The boxed kernel that runs `binding` with the family backend `member` of `backends`. Called by
// the C interface (kReportStatus), an invalid argument is reported, not thrown.
template <const OperatorBackends& backends, auto member, auto binding>
void boxed_kernel(shim::StableIValue* stack, uint64_t, uint64_t num_outputs) {
  if (!reports_status()) {
    binding(stack, backends.*member);
    return;
  }
  try {
    binding(stack, backends.*member);
  } catch (const InvalidArgument&) {
    // The binding's Tensor objects freed its arguments; the message is in the error record.
    mark_rejected();
    put_undefined_outputs(stack, num_outputs);
  }
}

// Every operator with its binding and the family backend it runs on: the one list of kernels.
template <const OperatorBackends& b>
constexpr KernelEntry operator_kernels[] = {
    {"flash_attention",
     boxed_kernel<b, &OperatorBackends::flash, flash::flash_attention_boxed>},
    {"flash_attention_varlen",
     boxed_kernel<b, &OperatorBackends::flash, flash::flash_attention_varlen_boxed>},
    {"flash_attention_fp8",
     boxed_kernel<b, &OperatorBackends::flash, flash::flash_attention_fp8_boxed>},
    {"bert_attention", boxed_kernel<b, &OperatorBackends::flash, bert::bert_attention_boxed>},
    {"causal_dot_product",
     boxed_kernel<b, &OperatorBackends::linear, linear::causal_dot_product_boxed>},
    {"add_bias_residual_layernorm",
     boxed_kernel<b, &OperatorBackends::bert, bert::add_bias_residual_layernorm_boxed>},
    {"add_bias_gelu", boxed_kernel<b, &OperatorBackends::bert, bert::add_bias_gelu_boxed>},
    {"add_bias_residual_affine",
     boxed_kernel<b, &OperatorBackends::bert, bert::add_bias_residual_affine_boxed>},
    {"remove_padding", boxed_kernel<b, &OperatorBackends::bert, bert::remove_padding_boxed>},
    {"restore_padding", boxed_kernel<b, &OperatorBackends::bert, bert::restore_padding_boxed>},
    {"reshape_and_cache",
     boxed_kernel<b, &OperatorBackends::paged, paged::reshape_and_cache_boxed>},
    {"paged_attention", boxed_kernel<b, &OperatorBackends::paged, paged::paged_attention_boxed>},
    {"paged_prefill_attention",
     boxed_kernel<b, &OperatorBackends::paged, paged::paged_prefill_attention_boxed>},
    {"decoder_layer",
     boxed_kernel<b, &OperatorBackends::decoder, decoder::decoder_layer_boxed>},
    {"embed_tokens", boxed_kernel<b, &OperatorBackends::step, step::embed_tokens_boxed>},
    {"decoder_head", boxed_kernel<b, &OperatorBackends::step, step::decoder_head_boxed>},
    {"copy_from_host", boxed_kernel<b, &OperatorBackends::step, step::copy_from_host_boxed>},
    {"cuda_graph_measure_begin",
     boxed_kernel<b, &OperatorBackends::graph, graph::measure_begin_boxed>},
    {"cuda_graph_measure_end",
     boxed_kernel<b, &OperatorBackends::graph, graph::measure_end_boxed>},
    {"cuda_graph_capture_begin",
     boxed_kernel<b, &OperatorBackends::graph, graph::capture_begin_boxed>},
    {"cuda_graph_capture_end",
     boxed_kernel<b, &OperatorBackends::graph, graph::capture_end_boxed>},
    {"cuda_graph_replay", boxed_kernel<b, &OperatorBackends::graph, graph::replay_boxed>},
    {"cuda_graph_release", boxed_kernel<b, &OperatorBackends::graph, graph::release_boxed>},
    {"sample_tokens",
     boxed_kernel<b, &OperatorBackends::sampling, sampling::sample_tokens_boxed>},
    {"encoder_layer",
     boxed_kernel<b, &OperatorBackends::encoder, encoder::encoder_layer_boxed>},
    {"gemm_pack_weight",
     boxed_kernel<b, &OperatorBackends::encoder, encoder::gemm_pack_weight_boxed>},
};

// Registers every operator's kernel for `dispatch_key` with the functions of `backends`.
template <const OperatorBackends& backends>
void register_operator_kernels(const char* dispatch_key) {
  register_kernels(dispatch_key, operator_kernels<backends>,
                   sizeof(operator_kernels<backends>) / sizeof(KernelEntry));
}

}  // namespace djl_attn
