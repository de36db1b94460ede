#include "graph/graph_ops.h"

#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"

namespace djl_attn::graph {
namespace {

// A CUDA tensor on a backend with graphs: its device index.
int check_cuda(const Tensor& t, ArgName name, const GraphBackend& backend) {
  if (t.device().type != DeviceType::kCuda || backend.replay == nullptr) {
    fail_invalid(name.prefix(), ": expected a CUDA tensor (a CUDA graph captures GPU work), got "
                 "a tensor on ", t.device().str());
  }
  return t.device().index;
}

// The arena: uint8 [bytes], contiguous, on a CUDA device.
int check_arena(const Tensor& arena, const char* op, const GraphBackend& backend) {
  const ArgName name{op, "arena"};
  const int device = check_cuda(arena, name, backend);
  check_dim(arena, name, 1, "[bytes]");
  check_dtype(arena, name, DType::kUInt8);
  check_contiguous(arena, name);
  return device;
}

Tensor int64_values(std::initializer_list<int64_t> values) {
  Tensor out = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kInt64,
                             Device{DeviceType::kCpu, -1});
  int64_t* data = out.data_as<int64_t>();
  for (int64_t v : values) *data++ = v;
  return out;
}

void check_graph(const char* op, const Tensor& arena, int64_t id, const GraphBackend& backend) {
  if (!backend.owns(arena.data(), id)) {
    fail_invalid(op, ": graph: expected the id of a live graph captured with this arena "
                 "(cuda_graph_capture_end), got ", id);
  }
}

}  // namespace

void measure_begin_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor anchor = take_tensor(stack, 0);
  const int device = check_cuda(anchor, {"cuda_graph_measure_begin", "anchor"}, backend);
  backend.measure_begin(device);
}

void measure_end_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor anchor = take_tensor(stack, 0);
  const int device = check_cuda(anchor, {"cuda_graph_measure_end", "anchor"}, backend);
  put_tensor(stack, 0, int64_values({backend.measure_end(device)}));
}

void capture_begin_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor arena = take_tensor(stack, 0);
  const int device = check_arena(arena, "cuda_graph_capture_begin", backend);
  backend.capture_begin(arena.data(), arena.numel(), device);
}

void capture_end_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor arena = take_tensor(stack, 0);
  const int device = check_arena(arena, "cuda_graph_capture_end", backend);
  const CapturedGraph graph = backend.capture_end(arena.data(), device);
  put_tensor(stack, 0, int64_values({graph.id, graph.nodes}));
}

void replay_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor arena = take_tensor(stack, 0);
  const int64_t id = read_int(stack, 1);
  const int device = check_arena(arena, "cuda_graph_replay", backend);
  check_graph("cuda_graph_replay", arena, id, backend);
  backend.replay(arena.data(), id, device);
}

void release_boxed(shim::StableIValue* stack, const GraphBackend& backend) {
  Tensor arena = take_tensor(stack, 0);
  const int64_t id = read_int(stack, 1);
  const int device = check_arena(arena, "cuda_graph_release", backend);
  check_graph("cuda_graph_release", arena, id, backend);
  backend.release(arena.data(), id, device);
}

}  // namespace djl_attn::graph
