#pragma once

#include <cupti.h>
#include <dlfcn.h>

#include <string>

namespace flopscope::counters {

// Helpers for the tables of CUPTI entry points that flopscope fills with dlsym (libcupti is
// dlopen'ed, never linked: counters/cupti_library.h says why). One place, so the tracer's, the
// range profiler's and the Host API's tables resolve and report the same way.

// Points `slot` at `name` in `handle`. When the symbol is missing and `missing` is given, its
// name is appended to `*missing` ("a, b, c") for the one error message the caller builds.
template <typename Fn>
bool ResolveCuptiSymbol(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot != nullptr) return true;
  if (missing != nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return false;
}

// CUPTI's name for `result` ("CUPTI_ERROR_UNKNOWN"), or "CUPTI error <n>" when the table has no
// cuptiGetResultString or it does not know the code.
inline std::string CuptiResultText(decltype(&::cuptiGetResultString) get_result_string,
                                   CUptiResult result) {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

}  // namespace flopscope::counters
