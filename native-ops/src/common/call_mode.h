// How an operator's boxed kernel reports an invalid argument in the current call.
//
//   kThrow         every caller except the C interface (Python, TorchScript): the binding's
//                  InvalidArgument propagates (Python sees a ValueError with its message).
//   kReportStatus  the C interface's dispatcher call (`djl_attn_call*`): the boxed kernel
//                  catches the InvalidArgument, marks the call rejected and returns undefined
//                  tensors as its outputs. The message is already in this thread's error record
//                  (common/error.h), and the exception never travels through PyTorch's C shim,
//                  which logs every exception it catches to stderr (`Exception in aoti_torch:
//                  ...`). The C interface then frees those outputs and returns a status code.
//
// One pass through the dispatcher, the binding run once: an earlier design ran each call's
// binding twice (a validation-only pass outside the dispatcher, then the dispatcher call), which
// cost ~1 us per call on the CPU (docs/design/op-call-cost.md).
//
// The mode is per thread and set only around one call: the dispatcher runs a kernel on the
// calling thread, and no binding calls another djl_attn operator.
#pragma once

namespace djl_attn {

enum class CallMode { kThrow, kReportStatus };

// Sets the calling thread's mode for its lifetime, restoring the previous one (and its rejected
// mark) after.
class CallModeScope {
 public:
  explicit CallModeScope(CallMode mode);
  ~CallModeScope();
  CallModeScope(const CallModeScope&) = delete;
  CallModeScope& operator=(const CallModeScope&) = delete;

  // True when a kernel rejected its arguments during this scope (kReportStatus only).
  bool rejected() const;

 private:
  CallMode previous_mode_;
  bool previous_rejected_;
};

// True when the current call reports invalid arguments as a status (kReportStatus).
bool reports_status();

// Marks the current call rejected (the boxed kernel, in kReportStatus mode).
void mark_rejected();

}  // namespace djl_attn
