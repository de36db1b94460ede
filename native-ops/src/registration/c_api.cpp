// The C interface for language bridges: calls operators through the dispatcher and turns the
// result into a status code plus this thread's last error message.

#include "djl_attn/c_api.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "registration/registration.h"
#include "shim/torch_shim.h"

using djl_attn::ErrorKind;
namespace shim = djl_attn::shim;

namespace {

// Releases the input handles we created if the call never reaches the dispatcher.
struct PendingInputs {
  std::vector<shim::AtenTensorHandle> handles;
  std::vector<shim::StableIValue*> boxes;
  bool consumed = false;
  ~PendingInputs() {
    if (consumed) return;
    for (auto h : handles) shim::torch().delete_tensor_object(h);
    for (auto b : boxes) delete b;
  }
};

shim::AtenTensorHandle copy_handle(int64_t value) {
  shim::AtenTensorHandle copy = nullptr;
  if (shim::torch().new_tensor_handle(reinterpret_cast<shim::AtenTensorHandle>(value), &copy) != 0) {
    djl_attn::fail_native("new_tensor_handle failed");
  }
  return copy;
}

int32_t status_of_last_error() {
  return djl_attn::last_error_kind() == ErrorKind::kInvalidArgument ? DJL_ATTN_INVALID_ARGUMENT
                                                                    : DJL_ATTN_NATIVE_ERROR;
}

}  // namespace

extern "C" {

int32_t djl_attn_registration_status(void) {
  return djl_attn::operators_registered(nullptr) ? DJL_ATTN_OK : DJL_ATTN_NATIVE_ERROR;
}

const char* djl_attn_registration_message(void) {
  thread_local std::string message;
  message.clear();
  djl_attn::operators_registered(&message);
  return message.c_str();
}

void djl_attn_set_num_threads(int32_t num_threads) { djl_attn::set_num_threads(num_threads); }

int32_t djl_attn_get_num_threads(void) { return djl_attn::get_num_threads(); }

int32_t djl_attn_call(const char* op_name, int32_t num_args, const int32_t* arg_kinds,
                      const int64_t* arg_values, int32_t num_outputs, int64_t* outputs) {
  djl_attn::clear_last_error();
  try {
    const std::string qualified = std::string("djl_attn::") + op_name;
    // The dispatcher reads the arguments from the stack and writes the outputs over it.
    std::vector<shim::StableIValue> stack(std::max(num_args, num_outputs), 0);
    PendingInputs pending;
    for (int32_t i = 0; i < num_args; ++i) {
      switch (arg_kinds[i]) {
        case DJL_ATTN_ARG_TENSOR: {
          // The dispatcher consumes the handles it is given: pass copies, never the caller's.
          shim::AtenTensorHandle copy = copy_handle(arg_values[i]);
          pending.handles.push_back(copy);
          stack[i] = reinterpret_cast<shim::StableIValue>(copy);
          break;
        }
        case DJL_ATTN_ARG_OPTIONAL_TENSOR: {
          if (arg_values[i] == 0) break;  // None
          shim::AtenTensorHandle copy = copy_handle(arg_values[i]);
          pending.handles.push_back(copy);
          auto* box = new shim::StableIValue(reinterpret_cast<shim::StableIValue>(copy));
          pending.boxes.push_back(box);
          stack[i] = reinterpret_cast<shim::StableIValue>(box);
          break;
        }
        case DJL_ATTN_ARG_INT:
        case DJL_ATTN_ARG_FLOAT:
        case DJL_ATTN_ARG_BOOL:
          stack[i] = static_cast<shim::StableIValue>(arg_values[i]);
          break;
        default:
          djl_attn::fail_native("djl_attn_call(", op_name, "): unknown argument kind ",
                                arg_kinds[i], " at index ", i);
      }
    }
    pending.consumed = true;
    if (shim::torch().call_dispatcher(qualified.c_str(), "", stack.data()) != 0) {
      if (djl_attn::last_error_kind() == ErrorKind::kNone) {
        djl_attn::record_error(ErrorKind::kNative,
                               qualified + " failed in PyTorch's dispatcher (no kernel for these "
                                           "tensors' device, or a schema mismatch); PyTorch logged "
                                           "the reason to stderr");
      }
      return status_of_last_error();
    }
    for (int32_t i = 0; i < num_outputs; ++i) outputs[i] = static_cast<int64_t>(stack[i]);
    return DJL_ATTN_OK;
  } catch (const std::exception& e) {
    if (djl_attn::last_error_kind() == ErrorKind::kNone) {
      djl_attn::record_error(ErrorKind::kNative, e.what());
    }
    return status_of_last_error();
  }
}

const char* djl_attn_last_error_message(void) {
  return djl_attn::last_error_message().c_str();
}

void djl_attn_delete_tensor(int64_t handle) {
  if (handle != 0) shim::torch().delete_tensor_object(reinterpret_cast<shim::AtenTensorHandle>(handle));
}

}  // extern "C"
