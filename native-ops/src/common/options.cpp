#include "common/options.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/error.h"

namespace djl_attn {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<Option*> options;
  std::string errors;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

std::string choices(const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : ", ") + values[i];
  return out;
}

int index_of(const std::vector<std::string>& values, const std::string& value) {
  if (value.empty()) return 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] == value) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Option::Option(const char* name, std::vector<std::string> values, const char* purpose)
    : name_(name), values_(std::move(values)), purpose_(purpose) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.options.push_back(this);
  const char* env = std::getenv(name);
  if (env == nullptr) return;
  const int index = index_of(values_, env);
  if (index >= 0) {
    index_.store(index);
    return;
  }
  // Once, at load: the default runs, and the reason is on stderr and in option_errors().
  const std::string line = std::string("djl_attn: ") + name + "='" + env +
                           "' ignored: expected one of " + choices(values_) + "; using " +
                           values_[0];
  r.errors += line + "\n";
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Option::set(const std::string& value) {
  const int index = index_of(values_, value);
  if (index < 0) {
    fail_invalid(name_, ": expected one of ", choices(values_), ", got '", value, "'");
  }
  index_.store(index);
}

Option* find_option(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (Option* o : r.options) {
    if (name == o->name()) return o;
  }
  return nullptr;
}

std::vector<Option*> all_options() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.options;
}

std::string option_errors() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.errors;
}

}  // namespace djl_attn
