#include "injector/ranges/domain_registry.h"

#include "common/nvtx_vocabulary.h"

namespace flopscope::injector {

DomainRegistry::DomainRegistry() {
  auto default_domain = std::make_unique<Domain>();
  default_domain_ = default_domain.get();
  domains_.emplace("", std::move(default_domain));
}

const Domain* DomainRegistry::Create(std::string_view name) {
  MutexLock lock(&mutex_);
  auto [it, inserted] = domains_.try_emplace(std::string(name));
  if (inserted) {
    it->second = std::make_unique<Domain>();
    it->second->id = static_cast<uint32_t>(domains_.size() - 1);
    it->second->name = std::string(name);
    it->second->is_flopscope = name == kFlopscopeDomain;
  }
  return it->second.get();
}

const RegisteredString* DomainRegistry::Register(const Domain* domain, std::string_view value) {
  // Key by domain id as well: the same text registered in two domains is two handles in NVTX.
  std::string key = std::to_string(domain->id);
  key.push_back('\0');
  key.append(value);
  MutexLock lock(&mutex_);
  auto [it, inserted] = strings_.try_emplace(std::move(key));
  if (inserted) {
    it->second = std::make_unique<RegisteredString>();
    it->second->domain = domain;
    it->second->value = std::string(value);
  }
  return it->second.get();
}

}  // namespace flopscope::injector
