#include "injector/export/thread_affinity.h"

#include <string>

#include "injector/warn.h"

namespace flopscope::injector {

void ThreadAffinity::Bind() {
  owner_ = pthread_self();
  bound_.store(true, std::memory_order_release);
}

bool ThreadAffinity::Check(std::string_view call) {
  if (bound_.load(std::memory_order_acquire) && pthread_equal(owner_, pthread_self()) != 0) {
    return true;
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  if (!warned_.exchange(true, std::memory_order_relaxed)) {
    Warn(std::string(call) +
         " called off the exporter thread: refused (the transport may only be called from the "
         "thread that opened it; a bug in flopscope, please report it)");
  }
  return false;
}

}  // namespace flopscope::injector
