#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <string_view>

namespace flopscope::injector {

// Checks, at run time and in release builds too, that an object is only used from the one thread
// that bound it. The transport's rule (transport_abi.h: call in only from the exporter thread)
// guards against heap corruption in the job, which nothing else would report: a broken call is
// refused, counted and warned about once, never carried out.
//
// Thread-safe: Check may run on any thread (that is its point); Bind runs once, before any Check
// that must pass.
class ThreadAffinity {
 public:
  // Makes the calling thread the owner.
  void Bind();
  // True on the owner thread. Elsewhere (or before Bind) the call is counted, the first one
  // warns on stderr naming `call`, and the caller must refuse it.
  bool Check(std::string_view call);
  // Calls refused so far.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  pthread_t owner_{};
  std::atomic<bool> bound_{false};  // release/acquire: publishes owner_
  std::atomic<uint64_t> refused_{0};
  std::atomic<bool> warned_{false};
};

}  // namespace flopscope::injector
