// The DJL_ATTN_* switches: one registry, read once when the library that declares a switch is
// loaded. Each switch is a closed list of values whose first entry is the default (what runs
// when the variable is unset or empty). An invalid value is reported once, at load, on stderr and
// in djl_attn_option_errors(), and the default is used: never a failure of every later call.
// Tests and benchmarks switch in-process through djl_attn_set_option (the C interface), which
// refuses an unknown name or value with an InvalidArgument naming the choices.
//
// The list, documented in docs/operators.md ("Switches"): DJL_ATTN_CPU_ISA, DJL_ATTN_CPU_GEMM
// and DJL_ATTN_CPU_THREADS (libdjl_attn.so, with their code); DJL_ATTN_FLASH_DECODE,
// DJL_ATTN_FLASH_HOPPER, DJL_ATTN_FLASH_CONFIG, DJL_ATTN_FLASH_HOPPER_SCHED, DJL_ATTN_FLASH_FP32,
// DJL_ATTN_PAGED_KERNEL, DJL_ATTN_PAGED_CONFIG, DJL_ATTN_PAGED_PARTITION and
// DJL_ATTN_LINEAR_KERNEL (libdjl_attn_cuda.so: declared in cuda/common/switches.cpp and read
// by its launchers only as one typed config, cuda/common/switches.h).
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace djl_attn {

class Option {
 public:
  // Declares a switch (a static object of the library that reads it) and reads the environment.
  // `values[0]` is the default; "" in `values` is not needed (unset and empty mean the default).
  Option(const char* name, std::vector<std::string> values, const char* purpose);
  Option(const Option&) = delete;
  Option& operator=(const Option&) = delete;

  // The index of the current value in `values()`: 0 for the default. Cheap, thread-safe.
  int index() const { return index_.load(std::memory_order_relaxed); }
  const std::string& value() const { return values_[index()]; }
  bool is(const char* v) const { return value() == v; }

  const char* name() const { return name_; }
  const std::vector<std::string>& values() const { return values_; }
  const char* purpose() const { return purpose_; }

  // Sets the value; throws InvalidArgument naming the choices for a value not in the list
  // ("" restores the default).
  void set(const std::string& value);

 private:
  const char* name_;
  std::vector<std::string> values_;
  const char* purpose_;
  std::atomic<int> index_{0};
};

// The switch called `name`, or null when no loaded library declares it.
Option* find_option(const std::string& name);

// Every declared switch, in declaration order.
std::vector<Option*> all_options();

// The invalid environment values found at load, one line each ("" when none).
std::string option_errors();

}  // namespace djl_attn
