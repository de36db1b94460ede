// Errors raised by operators, and the per-thread record the Java bridge reads.
//
// `aoti_torch_call_dispatcher` reports only an error code, so every error an operator raises is
// also recorded here, per thread, with its kind. The dispatcher runs the kernel on the calling
// thread, so right after a failed call that thread's record holds the operator's message.
// Python callers see the exception itself as a RuntimeError carrying the same message.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace djl_attn {

enum class ErrorKind : int32_t {
  kNone = 0,
  kInvalidArgument = 1,  // the caller passed something the operator does not accept
  kNative = 2,           // anything else: allocation, CUDA, missing libtorch symbols
};

// A caller error: the message names the argument, the rule and the value received.
class InvalidArgument : public std::invalid_argument {
 public:
  explicit InvalidArgument(const std::string& message);
};

// A failure that is not the caller's fault.
class NativeError : public std::runtime_error {
 public:
  explicit NativeError(const std::string& message);
};

// The calling thread's last recorded error (kind kNone and an empty message when none).
ErrorKind last_error_kind();
const std::string& last_error_message();
void clear_last_error();
void record_error(ErrorKind kind, const std::string& message);

// Message parts are appended to a std::string without iostreams: under torch 2.11 (the GPU
// machine) an ostringstream in this library crashed inside libstdc++'s locale code the first time
// an error message was built, while std::string formatting is locale-free and safe everywhere.
inline void append_part(std::string& out, const std::string& part) { out += part; }
inline void append_part(std::string& out, const char* part) { out += part; }
inline void append_part(std::string& out, char part) { out += part; }
inline void append_part(std::string& out, double part) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", part);
  out += buffer;
}
template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
void append_part(std::string& out, Int part) {
  out += std::to_string(part);
}

// Builds a message from parts: concat("q: expected 4 dims, got ", dim).
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (append_part(out, parts), ...);
  return out;
}

template <typename... Parts>
[[noreturn]] void fail_invalid(const Parts&... parts) {
  throw InvalidArgument(concat(parts...));
}

template <typename... Parts>
[[noreturn]] void fail_native(const Parts&... parts) {
  throw NativeError(concat(parts...));
}

}  // namespace djl_attn
