#include "common/call_mode.h"

namespace djl_attn {
namespace {

CallMode& thread_mode() {
  thread_local CallMode mode = CallMode::kFull;
  return mode;
}

}  // namespace

CallMode call_mode() { return thread_mode(); }

CallModeScope::CallModeScope(CallMode mode) : previous_(thread_mode()) { thread_mode() = mode; }

CallModeScope::~CallModeScope() { thread_mode() = previous_; }

}  // namespace djl_attn
