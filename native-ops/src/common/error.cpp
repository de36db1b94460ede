#include "common/error.h"

namespace djl_attn {
namespace {

struct LastError {
  ErrorKind kind = ErrorKind::kNone;
  std::string message;
};

LastError& last_error() {
  thread_local LastError error;
  return error;
}

}  // namespace

// Recording in the constructors means every throw site records, whoever catches it.
InvalidArgument::InvalidArgument(const std::string& message) : std::invalid_argument(message) {
  record_error(ErrorKind::kInvalidArgument, message);
}

NativeError::NativeError(const std::string& message) : std::runtime_error(message) {
  record_error(ErrorKind::kNative, message);
}

ErrorKind last_error_kind() { return last_error().kind; }

const std::string& last_error_message() { return last_error().message; }

void clear_last_error() {
  last_error().kind = ErrorKind::kNone;
  last_error().message.clear();
}

void record_error(ErrorKind kind, const std::string& message) {
  last_error().kind = kind;
  last_error().message = message;
}

}  // namespace djl_attn
