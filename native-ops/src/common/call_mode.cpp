#include "common/call_mode.h"

namespace djl_attn {
namespace {

struct ThreadCall {
  CallMode mode = CallMode::kThrow;
  bool rejected = false;
};

ThreadCall& thread_call() {
  thread_local ThreadCall call;
  return call;
}

}  // namespace

CallModeScope::CallModeScope(CallMode mode)
    : previous_mode_(thread_call().mode), previous_rejected_(thread_call().rejected) {
  thread_call().mode = mode;
  thread_call().rejected = false;
}

CallModeScope::~CallModeScope() {
  thread_call().mode = previous_mode_;
  thread_call().rejected = previous_rejected_;
}

bool CallModeScope::rejected() const { return thread_call().rejected; }

bool reports_status() { return thread_call().mode == CallMode::kReportStatus; }

void mark_rejected() { thread_call().rejected = true; }

}  // namespace djl_attn
