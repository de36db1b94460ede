#include "cuda/common/scratch.h"

#include <utility>

#include "common/error.h"

namespace djl_attn::cuda {
namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

enum class Mode { kNone, kMeasure, kCapture };

// One per thread: a capture is the calling thread's (cudaStreamCaptureModeThreadLocal), and
// the dispatcher runs an operator on the thread that called it.
struct ThreadCapture {
  Mode mode = Mode::kNone;
  int device = -1;
  cudaStream_t stream = nullptr;
  char* arena = nullptr;
  size_t arena_bytes = 0;
  size_t top = 0;   // bytes in use on the stack
  size_t peak = 0;  // high-water mark of `top`
};

ThreadCapture& thread_capture() {
  thread_local ThreadCapture state;
  return state;
}

}  // namespace

Scratch::Scratch(size_t bytes, int device) {
  if (bytes == 0) return;
  ThreadCapture& s = thread_capture();
  const bool stacked = s.mode != Mode::kNone && s.device == device;
  if (stacked) {
    const size_t need = aligned(bytes);
    if (s.mode == Mode::kCapture && s.top + need > s.arena_bytes) {
      // The capture runs the calls the measure ran: more now means they differ.
      fail_native("captured step: its temporaries need more than the ", s.arena_bytes,
                  " bytes measured for them (", s.top + need, "); the captured calls differ "
                  "from the measured ones");
    }
    mark_ = s.top;
    stacked_ = true;
    s.top += need;
    if (s.top > s.peak) s.peak = s.top;
    if (s.mode == Mode::kCapture) {
      data_ = s.arena + mark_;
      return;
    }
  }
  owned_ = Tensor::empty({static_cast<int64_t>(aligned(bytes))}, DType::kUInt8,
                         Device{DeviceType::kCuda, device});
  data_ = owned_.data();
}

Scratch::~Scratch() { release(); }

Scratch::Scratch(Scratch&& other) noexcept
    : owned_(std::move(other.owned_)),
      mark_(other.mark_),
      stacked_(std::exchange(other.stacked_, false)),
      data_(std::exchange(other.data_, nullptr)) {}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    release();
    owned_ = std::move(other.owned_);
    mark_ = other.mark_;
    stacked_ = std::exchange(other.stacked_, false);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

void Scratch::release() {
  if (stacked_) {
    // Scratches are scoped to a call, so they go in the reverse of their order.
    thread_capture().top = mark_;
    stacked_ = false;
  }
  data_ = nullptr;
}

namespace step_capture {

void begin_measure(int device) {
  ThreadCapture& s = thread_capture();
  if (s.mode != Mode::kNone) fail_native("captured step: a measure or capture is in progress");
  s = ThreadCapture{};
  s.mode = Mode::kMeasure;
  s.device = device;
}

size_t end_measure() {
  ThreadCapture& s = thread_capture();
  if (s.mode != Mode::kMeasure) fail_native("captured step: no measure in progress");
  const size_t peak = s.peak;
  s = ThreadCapture{};
  return peak;
}

void begin(int device, cudaStream_t stream, void* arena, size_t bytes) {
  ThreadCapture& s = thread_capture();
  if (s.mode != Mode::kNone) fail_native("captured step: a measure or capture is in progress");
  s = ThreadCapture{};
  s.mode = Mode::kCapture;
  s.device = device;
  s.stream = stream;
  s.arena = static_cast<char*>(arena);
  s.arena_bytes = bytes;
}

void end() { thread_capture() = ThreadCapture{}; }

bool capturing() { return thread_capture().mode == Mode::kCapture; }

cudaStream_t stream(int device) {
  const ThreadCapture& s = thread_capture();
  return s.mode == Mode::kCapture && s.device == device ? s.stream : nullptr;
}

}  // namespace step_capture
}  // namespace djl_attn::cuda
