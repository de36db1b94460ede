// How the binding of the current call treats its checks: the C interface of the library
// (`djl_attn_call`) runs an operator's checks itself before it dispatches, so that an invalid
// argument is reported as a status code and never travels through PyTorch's dispatcher (whose C
// shim logs every exception it catches to stderr as `Exception in aoti_torch: ...`).
//
//   kFull          every caller except the C interface (Python, TorchScript): check, then run.
//   kValidateOnly  the C interface's first pass: run the checks, then return before allocating
//                  anything or launching.
//   kChecked       the C interface's dispatcher call after that pass: the checks that read
//                  index values back to the host (a device-to-host copy and a synchronisation
//                  on CUDA) are not repeated; the cheap shape checks still run.
//
// The mode is per thread and set only around one call: the dispatcher runs a kernel on the
// calling thread, and no binding calls another djl_attn operator.
#pragma once

namespace djl_attn {

enum class CallMode { kFull, kValidateOnly, kChecked };

CallMode call_mode();

// Sets the calling thread's mode for its lifetime, restoring the previous one after.
class CallModeScope {
 public:
  explicit CallModeScope(CallMode mode);
  ~CallModeScope();
  CallModeScope(const CallModeScope&) = delete;
  CallModeScope& operator=(const CallModeScope&) = delete;

 private:
  CallMode previous_;
};

// True when the binding should return right after its checks.
inline bool validation_only() { return call_mode() == CallMode::kValidateOnly; }

// True when the binding should run the checks that read index values (kv_lens, cu_seqlens,
// block tables, slot mappings): always, except on the dispatcher call that follows a validation
// pass of the same arguments.
inline bool check_values() { return call_mode() != CallMode::kChecked; }

}  // namespace djl_attn
