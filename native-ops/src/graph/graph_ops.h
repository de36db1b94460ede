// The bindings of the cuda_graph_* operators: a decode step captured once as a CUDA graph and
// replayed as one launch (docs/design/captured-decode-step.md). The caller (Java's
// StepGraphs) runs the step's operator calls three times per graph: under
// cuda_graph_measure_begin/end (an eager warm-up that also sizes the arena), then between
// cuda_graph_capture_begin/end, which records them into a graph whose temporaries live in the
// arena; cuda_graph_replay then launches that graph on the current stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shim/torch_shim.h"

namespace djl_attn::graph {

struct CapturedGraph {
  int64_t id;
  int64_t nodes;  // kernel and memory nodes of the graph
};

// The device side; every function null on a backend without CUDA graphs (the CPU), where the
// bindings refuse the call naming the argument's device.
struct GraphBackend {
  void (*measure_begin)(int device);
  int64_t (*measure_end)(int device);  // the arena the measured calls need, bytes
  void (*capture_begin)(void* arena, int64_t bytes, int device);
  CapturedGraph (*capture_end)(void* arena, int device);
  // Whether `id` names a live graph captured with this arena (checked before any launch).
  bool (*owns)(const void* arena, int64_t id);
  void (*replay)(void* arena, int64_t id, int device);
  void (*release)(void* arena, int64_t id, int device);
};

// cuda_graph_measure_begin(Tensor anchor) -> ()
void measure_begin_boxed(shim::StableIValue* stack, const GraphBackend& backend);
// cuda_graph_measure_end(Tensor anchor) -> Tensor   (int64 [1] on the CPU: bytes)
void measure_end_boxed(shim::StableIValue* stack, const GraphBackend& backend);
// cuda_graph_capture_begin(Tensor(a!) arena) -> ()
void capture_begin_boxed(shim::StableIValue* stack, const GraphBackend& backend);
// cuda_graph_capture_end(Tensor arena) -> Tensor    (int64 [2] on the CPU: graph id, nodes)
void capture_end_boxed(shim::StableIValue* stack, const GraphBackend& backend);
// cuda_graph_replay(Tensor(a!) arena, int graph) -> ()
void replay_boxed(shim::StableIValue* stack, const GraphBackend& backend);
// cuda_graph_release(Tensor arena, int graph) -> ()
void release_boxed(shim::StableIValue* stack, const GraphBackend& backend);

}  // namespace djl_attn::graph
