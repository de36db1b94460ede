#include "cuda/graph/step_graph_cuda.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "common/error.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/scratch.h"

namespace djl_attn::cuda {
namespace {

struct LiveGraph {
  cudaGraphExec_t exec;
  const void* arena;
  int device;
};

// Every live graph of the process, by id. Ids are never reused, so a released or foreign id is
// refused rather than replaying someone else's graph.
struct Registry {
  std::mutex mutex;
  std::map<int64_t, LiveGraph> graphs;
  int64_t next_id = 1;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// The stream a thread captures on: its own, non-blocking, so that work other threads put on the
// legacy default stream neither joins the capture nor waits for it.
cudaStream_t capture_stream(int device) {
  thread_local cudaStream_t streams[64] = {};
  if (device < 0 || device >= 64) fail_native("CUDA device index ", device, " out of [0, 64)");
  if (streams[device] == nullptr) {
    DJL_ATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
  }
  return streams[device];
}

void measure_begin(int device) {
  DeviceGuard guard(device);
  step_capture::begin_measure(device);
}

int64_t measure_end(int) { return static_cast<int64_t>(step_capture::end_measure()); }

void capture_begin(void* arena, int64_t bytes, int device) {
  DeviceGuard guard(device);
  cudaStream_t stream = capture_stream(device);
  // The captured work reads what the current stream wrote before (the step's inputs, the
  // cache): the capture stream joins it first. Replays run on the current stream itself.
  cudaEvent_t ready = nullptr;
  DJL_ATTN_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  DJL_ATTN_CUDA_CHECK(cudaEventRecord(ready, current_stream(device)));
  DJL_ATTN_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  DJL_ATTN_CUDA_CHECK(cudaEventDestroy(ready));
  // Thread-local mode: other threads may allocate and synchronise while this one captures.
  DJL_ATTN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  step_capture::begin(device, stream, arena, static_cast<size_t>(bytes));
}

graph::CapturedGraph capture_end(void* arena, int device) {
  DeviceGuard guard(device);
  cudaStream_t stream = step_capture::stream(device);
  step_capture::end();
  if (stream == nullptr) fail_native("cuda_graph_capture_end: no capture in progress");
  cudaGraph_t graph = nullptr;
  // Ends the capture even when a captured call failed (the capture is then invalidated and
  // this reports it): the stream must not stay in capture mode.
  DJL_ATTN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0;
  const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  DJL_ATTN_CUDA_CHECK(counted);
  DJL_ATTN_CUDA_CHECK(made);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const int64_t id = r.next_id++;
  r.graphs[id] = LiveGraph{exec, arena, device};
  return {id, static_cast<int64_t>(nodes)};
}

bool owns(const void* arena, int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.graphs.find(id);
  return it != r.graphs.end() && it->second.arena == arena;
}

void replay(void* arena, int64_t id, int device) {
  cudaGraphExec_t exec = nullptr;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.graphs.find(id);
    if (it == r.graphs.end() || it->second.arena != arena) {
      fail_native("cuda_graph_replay: graph ", id, " was released");
    }
    exec = it->second.exec;
  }
  DeviceGuard guard(device);
  DJL_ATTN_CUDA_CHECK(cudaGraphLaunch(exec, current_stream(device)));
}

void release(void* arena, int64_t id, int device) {
  cudaGraphExec_t exec = nullptr;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.graphs.find(id);
    if (it == r.graphs.end() || it->second.arena != arena) return;
    exec = it->second.exec;
    r.graphs.erase(it);
  }
  DeviceGuard guard(device);
  DJL_ATTN_CUDA_CHECK(cudaGraphExecDestroy(exec));
}

}  // namespace

const graph::GraphBackend kGraphBackend{measure_begin, measure_end, capture_begin, capture_end,
                                        owns,          replay,      release};

}  // namespace djl_attn::cuda
