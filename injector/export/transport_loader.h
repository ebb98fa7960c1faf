#pragma once

#include <memory>
#include <string>

#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

// Loads libflopscope_transport.so into a link namespace of its own (dlmopen LM_ID_NEWLM), so its
// gRPC, protobuf and Abseil never interpose on the job's copies and the job's never on ours.
// LD_PRELOAD does not reach the new namespace, so the injector is not loaded twice.
//
// Hazard: the new namespace has its own libc, whose per-thread ctype tables are set up only on
// threads that libc created. A thread of the main libc that calls into gRPC crashes in isalpha()
// unless it first runs the new namespace's __ctype_init. Load() does that for the calling
// thread; any other thread of ours must call PrepareThisThread() before its first call in.
//
// Hazard: both libcs keep pthread-specific data in the same per-thread slots, each numbering its
// own keys. A call into the namespace that sets thread-specific data on a thread (gRPC, Abseil
// and protobuf do) writes slots that the job's libc may have handed to the job's own keys. So:
// call in (Load included, whose constructors run on the calling thread) only from a thread of
// the injector's own that lives until the process exits, never from an application thread. The
// exporter thread is that thread. (A unit test that called in from gtest's main thread had
// gtest's thread-local slot overwritten and crashed at exit.)
class TransportLoader {
 public:
  // Null (reason in *error) when the library, its libc or its entry point cannot be found, or
  // when its ABI version differs. Call on the thread that will use the transport.
  static std::unique_ptr<TransportLoader> Load(const std::string& path, std::string* error);

  // libflopscope_transport.so in the directory of the library holding this code.
  static std::string DefaultPath();

  const fs_transport_api* api() const { return api_; }
  void PrepareThisThread() const;

  // The namespace is never unloaded (a gRPC library does not survive dlclose), so this leaks the
  // handle on purpose.
  ~TransportLoader() = default;

 private:
  TransportLoader(void* handle, void (*ctype_init)(), const fs_transport_api* api)
      : handle_(handle), ctype_init_(ctype_init), api_(api) {}

  void* handle_;
  void (*ctype_init_)();
  const fs_transport_api* api_;
};

}  // namespace flopscope::injector
