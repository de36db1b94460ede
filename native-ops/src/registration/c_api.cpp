// The C interface for language bridges: calls operators through the dispatcher and turns the
// result into a status code plus this thread's last error message.

#include "djl_attn/c_api.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/call_mode.h"
#include "common/check.h"
#include "common/error.h"
#include "common/options.h"
#include "common/thread_pool.h"
#include "flash/flash_params.h"
#include "linear/linear_params.h"
#include "paged/paged_checks.h"
#include "paged/paged_params.h"
#include "registration/registration.h"
#include "shim/torch_shim.h"

using djl_attn::ErrorKind;
namespace shim = djl_attn::shim;

namespace {

// A dispatcher stack for one call, in a fixed array (no allocation but the `Tensor?` boxes):
// new handle copies of the tensors (the receiver consumes what it is given; never the caller's
// own handles), `Tensor?` boxed, scalars as they are. Until the dispatcher takes the stack, the
// copies and boxes are this object's and freed with it.
class CallStack {
 public:
  CallStack() = default;
  ~CallStack() {
    if (handed_over_) return;
    for (int32_t i = 0; i < num_handles_; ++i) shim::torch().delete_tensor_object(handles_[i]);
    for (int32_t i = 0; i < num_boxes_; ++i) delete boxes_[i];
  }
  CallStack(const CallStack&) = delete;
  CallStack& operator=(const CallStack&) = delete;

  void fill(const djl_attn::OperatorSignature& op, const int64_t* arg_values) {
    for (size_t i = 0; i < op.arg_kinds.size(); ++i) {
      switch (op.arg_kinds[i]) {
        case DJL_ATTN_ARG_TENSOR:
          slots_[i] = reinterpret_cast<shim::StableIValue>(copy_handle(arg_values[i]));
          break;
        case DJL_ATTN_ARG_OPTIONAL_TENSOR: {
          if (arg_values[i] == 0) break;  // None
          shim::AtenTensorHandle copy = copy_handle(arg_values[i]);
          boxes_[num_boxes_] = new shim::StableIValue(reinterpret_cast<shim::StableIValue>(copy));
          slots_[i] = reinterpret_cast<shim::StableIValue>(boxes_[num_boxes_++]);
          break;
        }
        default:  // int, float (a double's bits), bool
          slots_[i] = static_cast<shim::StableIValue>(arg_values[i]);
          break;
      }
    }
  }
  // The stack, handed to the dispatcher: from here on it owns the arguments.
  shim::StableIValue* hand_over() {
    handed_over_ = true;
    return slots_;
  }

 private:
  shim::AtenTensorHandle copy_handle(int64_t value) {
    shim::AtenTensorHandle copy = nullptr;
    if (shim::torch().new_tensor_handle(reinterpret_cast<shim::AtenTensorHandle>(value), &copy) !=
        0) {
      djl_attn::fail_native("new_tensor_handle failed");
    }
    handles_[num_handles_++] = copy;
    return copy;
  }

  shim::StableIValue slots_[djl_attn::kMaxStackSlots] = {};
  shim::AtenTensorHandle handles_[djl_attn::kMaxStackSlots];
  shim::StableIValue* boxes_[djl_attn::kMaxStackSlots];
  int32_t num_handles_ = 0;
  int32_t num_boxes_ = 0;
  bool handed_over_ = false;
};

// The bridge's arguments must be the schema's: a handle read as an integer (or the reverse)
// would crash the kernel, so a mismatch is refused before anything runs.
void check_signature(const djl_attn::OperatorSignature& op, int32_t num_args,
                     const int32_t* arg_kinds, int32_t num_outputs) {
  if (num_args != static_cast<int32_t>(op.arg_kinds.size()) || num_outputs != op.num_outputs) {
    djl_attn::fail_native("djl_attn_call(", op.name, "): the schema takes ", op.arg_kinds.size(),
                          " arguments and returns ", op.num_outputs, " tensors, the call passed ",
                          num_args, " and expects ", num_outputs, " (", op.schema, ")");
  }
  for (int32_t i = 0; i < num_args; ++i) {
    if (arg_kinds[i] != op.arg_kinds[i]) {
      djl_attn::fail_native("djl_attn_call(", op.name, "): argument ", i, " has kind ",
                            arg_kinds[i], ", the schema's is ", op.arg_kinds[i], " (", op.schema,
                            ")");
    }
  }
}

int32_t status_of_last_error();
const djl_attn::OperatorSignature* operator_at(int32_t index);

// The kernel for a call whose tensors mix cpu or cuda with a device no djl_attn kernel serves
// (meta): the kernel of the first cpu or cuda tensor, whose binding names the argument on the
// wrong device, as it does for any other mismatch. The dispatcher would pick the other device's
// missing kernel and fail without naming it. Null for the common call, which is dispatched.
shim::BoxedKernel kernel_for_mixed_devices(const djl_attn::OperatorSignature& op,
                                           const int64_t* arg_values) {
  const auto& api = shim::torch();
  int32_t served = -1;
  bool unserved = false;
  for (size_t i = 0; i < op.arg_kinds.size(); ++i) {
    const int32_t kind = op.arg_kinds[i];
    if (kind != DJL_ATTN_ARG_TENSOR && (kind != DJL_ATTN_ARG_OPTIONAL_TENSOR || arg_values[i] == 0)) {
      continue;
    }
    int32_t type = 0;
    if (api.get_device_type(reinterpret_cast<shim::AtenTensorHandle>(arg_values[i]), &type) != 0) {
      djl_attn::fail_native("get_device_type failed for argument ", i, " of ", op.name);
    }
    if (type == api.codes.cpu || type == api.codes.cuda) {
      if (served < 0) served = type;
    } else {
      unserved = true;
    }
  }
  if (!unserved || served < 0) return nullptr;
  return djl_attn::registered_kernel(served == api.codes.cpu ? "CPU" : "CUDA", op.name.c_str());
}

// One call through the dispatcher, its kernel in kReportStatus mode (common/call_mode.h): an
// invalid argument comes back as DJL_ATTN_INVALID_ARGUMENT without passing through PyTorch's C
// shim as an exception (which would log it to stderr). The first `num_outputs` outputs go to
// `outputs`; the rest are freed.
int32_t call_operator(const djl_attn::OperatorSignature& op, const int64_t* arg_values,
                      int32_t num_outputs, int64_t* outputs) {
  CallStack arguments;
  arguments.fill(op, arg_values);
  djl_attn::CallModeScope mode(djl_attn::CallMode::kReportStatus);
  const shim::BoxedKernel mixed = kernel_for_mixed_devices(op, arg_values);
  shim::StableIValue* stack = arguments.hand_over();
  if (mixed != nullptr) {
    mixed(stack, op.arg_kinds.size(), op.num_outputs);  // owns and frees the arguments
  } else if (shim::torch().call_dispatcher(op.qualified_name.c_str(), "", stack) != 0) {
    if (djl_attn::last_error_kind() == ErrorKind::kNone) {
      // LibraryLoader (Java) recognises "no kernel for these tensors' device" in this text.
      djl_attn::record_error(ErrorKind::kNative,
                             op.qualified_name +
                                 " failed in PyTorch's dispatcher (no kernel for these tensors' "
                                 "device); PyTorch logged the reason to stderr");
    }
    return status_of_last_error();
  }
  if (mode.rejected()) {
    // The kernel returned undefined tensors in place of its outputs.
    for (int32_t i = 0; i < op.num_outputs; ++i) {
      shim::torch().delete_tensor_object(reinterpret_cast<shim::AtenTensorHandle>(stack[i]));
    }
    return DJL_ATTN_INVALID_ARGUMENT;
  }
  for (int32_t i = 0; i < op.num_outputs; ++i) {
    if (i < num_outputs) {
      outputs[i] = static_cast<int64_t>(stack[i]);
    } else {
      shim::torch().delete_tensor_object(reinterpret_cast<shim::AtenTensorHandle>(stack[i]));
    }
  }
  return DJL_ATTN_OK;
}

const djl_attn::OperatorSignature* operator_at(int32_t index) {
  const auto& ops = djl_attn::operator_signatures();
  if (index < 0 || index >= static_cast<int32_t>(ops.size())) return nullptr;
  return &ops[index];
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
    const djl_attn::OperatorSignature* op = djl_attn::find_operator(op_name);
    if (op == nullptr) djl_attn::fail_native("djl_attn_call: no operator named '", op_name, "'");
    check_signature(*op, num_args, arg_kinds, num_outputs);
    return call_operator(*op, arg_values, num_outputs, outputs);
  } catch (const std::exception& e) {
    if (djl_attn::last_error_kind() == ErrorKind::kNone) {
      djl_attn::record_error(ErrorKind::kNative, e.what());
    }
    return status_of_last_error();
  }
}

int32_t djl_attn_call_operator(int32_t index, const int64_t* arg_values, int32_t num_outputs,
                               int64_t* outputs) {
  djl_attn::clear_last_error();
  try {
    const djl_attn::OperatorSignature* op = operator_at(index);
    if (op == nullptr) {
      djl_attn::fail_native("djl_attn_call_operator: no operator at index ", index);
    }
    if (num_outputs < 0 || num_outputs > op->num_outputs) {
      djl_attn::fail_native("djl_attn_call_operator(", op->name, "): ", num_outputs,
                            " outputs asked, the schema returns ", op->num_outputs);
    }
    return call_operator(*op, arg_values, num_outputs, outputs);
  } catch (const std::exception& e) {
    if (djl_attn::last_error_kind() == ErrorKind::kNone) {
      djl_attn::record_error(ErrorKind::kNative, e.what());
    }
    return status_of_last_error();
  }
}

const char* djl_attn_supported_values(const char* key) {
  static const std::vector<std::pair<std::string, std::string>> table = [] {
    using namespace djl_attn;
#define DJL_FLASH_LIST_ITEM(d) d,
    static constexpr int kFlashHeadDims[] = {DJL_FLASH_FOR_EACH_HEAD_DIM(DJL_FLASH_LIST_ITEM)};
#undef DJL_FLASH_LIST_ITEM
    std::string dtypes;
    for (DType d : kKernelDTypes) dtypes += (dtypes.empty() ? "" : ",") + std::string(dtype_name(d));
    return std::vector<std::pair<std::string, std::string>>{
        {"paged.max_head_dim", std::to_string(paged::kMaxHeadDim)},
        {"paged.head_dims", csv_str(paged::kHeadDims)},
        {"paged.block_sizes", csv_str(paged::kBlockSizes)},
        {"flash.max_head_dim", std::to_string(flash::kMaxHeadDim)},
        {"flash.tensor_core_head_dims", csv_str(kFlashHeadDims)},
        {"linear.max_dim", std::to_string(linear::kMaxDim)},
        {"dtypes", dtypes},
    };
  }();
  if (key == nullptr) return nullptr;
  for (const auto& entry : table) {
    if (entry.first == key) return entry.second.c_str();
  }
  return nullptr;
}

int32_t djl_attn_set_option(const char* name, const char* value) {
  djl_attn::clear_last_error();
  try {
    djl_attn::Option* option = djl_attn::find_option(name == nullptr ? "" : name);
    if (option == nullptr) {
      djl_attn::fail_invalid("djl_attn_set_option: no switch named '", name == nullptr ? "" : name,
                             "' in the loaded libraries");
    }
    option->set(value == nullptr ? "" : value);
    return DJL_ATTN_OK;
  } catch (const std::exception& e) {
    return status_of_last_error();
  }
}

const char* djl_attn_get_option(const char* name) {
  djl_attn::Option* option = djl_attn::find_option(name == nullptr ? "" : name);
  return option == nullptr ? nullptr : option->value().c_str();
}

const char* djl_attn_option_values(const char* name) {
  djl_attn::Option* option = djl_attn::find_option(name == nullptr ? "" : name);
  if (option == nullptr) return nullptr;
  thread_local std::string values;
  values.clear();
  for (const std::string& v : option->values()) values += (values.empty() ? "" : ",") + v;
  return values.c_str();
}

const char* djl_attn_option_errors(void) {
  thread_local std::string errors;
  errors = djl_attn::option_errors();
  return errors.c_str();
}

int32_t djl_attn_operator_count(void) {
  return static_cast<int32_t>(djl_attn::operator_signatures().size());
}

const char* djl_attn_operator_schema(int32_t index) {
  const djl_attn::OperatorSignature* op = operator_at(index);
  return op == nullptr ? "" : op->schema.c_str();
}

const char* djl_attn_operator_name(int32_t index) {
  const djl_attn::OperatorSignature* op = operator_at(index);
  return op == nullptr ? "" : op->name.c_str();
}

int32_t djl_attn_operator_num_outputs(int32_t index) {
  const djl_attn::OperatorSignature* op = operator_at(index);
  return op == nullptr ? -1 : op->num_outputs;
}

int32_t djl_attn_operator_arg_kinds(int32_t index, int32_t* kinds, int32_t capacity) {
  const djl_attn::OperatorSignature* op = operator_at(index);
  if (op == nullptr) return -1;
  const int32_t count = static_cast<int32_t>(op->arg_kinds.size());
  if (kinds != nullptr && capacity >= count) {
    std::copy(op->arg_kinds.begin(), op->arg_kinds.end(), kinds);
  }
  return count;
}

int32_t djl_attn_release_free_memory(void) {
#if defined(__GLIBC__)
  return malloc_trim(0) == 1 ? 1 : 0;
#else
  return -1;
#endif
}

int32_t djl_attn_check_paged_indices(const char* op, const int32_t* block_tables,
                                     const int32_t* context_lens, int64_t num_seqs,
                                     int64_t max_blocks, const int64_t* slot_mapping,
                                     int64_t num_tokens, int64_t block_size, int64_t num_blocks) {
  djl_attn::clear_last_error();
  try {
    const char* who = op == nullptr ? "djl_attn_check_paged_indices" : op;
    if (num_seqs < 0 || max_blocks < 0 || num_tokens < 0 || block_size < 1 || num_blocks < 0) {
      djl_attn::fail_invalid(who, ": expected num_seqs, max_blocks, num_tokens, num_blocks >= 0 "
                             "and block_size >= 1, got ", num_seqs, ", ", max_blocks, ", ",
                             num_tokens, ", ", num_blocks, " and ", block_size);
    }
    const bool tables_missing =
        num_seqs > 0 && (context_lens == nullptr || (max_blocks > 0 && block_tables == nullptr));
    if (tables_missing || (num_tokens > 0 && slot_mapping == nullptr)) {
      djl_attn::fail_invalid(who, ": expected arrays for the ", num_seqs, " sequences and ",
                             num_tokens, " tokens, got a null pointer");
    }
    djl_attn::paged::check_block_tables(who, context_lens, num_seqs, block_tables, max_blocks,
                                        block_size, num_blocks);
    djl_attn::paged::check_slots(who, slot_mapping, num_tokens, num_blocks * block_size);
    return DJL_ATTN_OK;
  } catch (const std::exception& e) {
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
