#include "examples/transformer_nvtx/nvtx_ranges.h"

namespace transformer_nvtx {
namespace {

nvtxEventAttributes_t AsciiMessage(const char* text) {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = text;
  return attributes;
}

}  // namespace

nvtxDomainHandle_t FlopscopeDomain() {
  // A function-local static is initialised once even when threads race to it.
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("flopscope");
  return domain;
}

ScopedPhaseRange::ScopedPhaseRange(const char* name) {
  const nvtxEventAttributes_t attributes = AsciiMessage(name);
  nvtxDomainRangePushEx(FlopscopeDomain(), &attributes);
}

ScopedPhaseRange::~ScopedPhaseRange() { nvtxDomainRangePop(FlopscopeDomain()); }

void AnnounceMetadata(const std::string& key_value) {
  const nvtxEventAttributes_t attributes = AsciiMessage(key_value.c_str());
  nvtxDomainMarkEx(FlopscopeDomain(), &attributes);
}

}  // namespace transformer_nvtx
