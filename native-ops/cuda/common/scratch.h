// Device memory for the temporaries of one operator call, and the calling thread's step capture
// (docs/design/captured-decode-step.md).
//
// Outside a capture a Scratch comes from PyTorch's caching allocator, as Tensor::empty does.
// While the thread captures a CUDA graph (cuda_graph_capture_begin), every Scratch is carved from
// the graph's arena instead, as a stack: a call's temporaries are handed back when the call
// returns and the next call reuses the same addresses, which stream order makes safe. An arena
// outlives its graph's replays; memory from the caching allocator would go back to its pool when
// the call returns and be handed to other work while the graph still writes it.
//
// Between cuda_graph_measure_begin and cuda_graph_measure_end the thread's calls allocate as
// usual and record the stack's high-water mark: the arena a capture of the same calls needs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "common/tensor.h"

namespace djl_attn::cuda {

class Scratch {
 public:
  Scratch() = default;
  // `bytes` (0: none) on `device`; the pointer is 256-byte aligned.
  Scratch(size_t bytes, int device);
  ~Scratch();
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&& other) noexcept;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

 private:
  void release();

  Tensor owned_;          // outside a capture
  size_t mark_ = 0;       // the stack top this Scratch restores
  bool stacked_ = false;  // carved from the arena or counted by the meter
  void* data_ = nullptr;
};

namespace step_capture {

// The thread's state; each function fails with NativeError when called out of order.
void begin_measure(int device);
size_t end_measure();  // the high-water mark, bytes
// Starts capturing the thread's launches on `device` into a graph on `stream`, temporaries in
// [arena, arena + bytes).
void begin(int device, cudaStream_t stream, void* arena, size_t bytes);
void end();
bool capturing();
// The stream the thread's launches on `device` go to while it captures; null otherwise.
cudaStream_t stream(int device);

}  // namespace step_capture
}  // namespace djl_attn::cuda
