// CUDA graphs of captured decode steps: the device side of the cuda_graph_* operators
// (src/graph/graph_ops.h, docs/design/captured-decode-step.md).
#pragma once

#include "graph/graph_ops.h"

namespace djl_attn::cuda {

extern const graph::GraphBackend kGraphBackend;

}  // namespace djl_attn::cuda
