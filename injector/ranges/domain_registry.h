#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace flopscope::injector {

// An NVTX domain as the tool sees it. The handle NVTX hands back to the application is a pointer
// to one of these; they live as long as the process (see DomainRegistry).
struct Domain {
  uint32_t id = 0;            // 0 for NVTX's default domain
  std::string name;           // "" for the default domain
  bool is_flopscope = false;  // steps, phases and metadata marks (DESIGN: Time, metadata channel)
};

// A string registered with nvtxDomainRegisterString{A,W}; its pointer is the nvtxStringHandle_t.
struct RegisteredString {
  const Domain* domain = nullptr;
  std::string value;  // valid UTF-8
};

// Interns domains and registered strings by text. Every NVTX instance in the process (the app and
// each library that includes the header-only NVTX) initialises the tool separately, so two
// instances creating the same domain must get the same Domain. Nothing is ever freed: an NVTX
// handle may be used by any thread at any time, even after nvtxDomainDestroy.
class DomainRegistry {
 public:
  DomainRegistry();
  DomainRegistry(const DomainRegistry&) = delete;
  DomainRegistry& operator=(const DomainRegistry&) = delete;

  const Domain* Default() const { return default_domain_; }
  // `name` must be valid UTF-8 (the NVTX tool sanitizes first).
  const Domain* Create(std::string_view name);
  const RegisteredString* Register(const Domain* domain, std::string_view value);

 private:
  // Guards both maps; taken only when an application creates a domain or registers a string,
  // never on the push/pop path.
  Mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<Domain>> domains_ FS_GUARDED_BY(mutex_);
  std::unordered_map<std::string, std::unique_ptr<RegisteredString>> strings_ FS_GUARDED_BY(mutex_);
  const Domain* default_domain_;
};

}  // namespace flopscope::injector
