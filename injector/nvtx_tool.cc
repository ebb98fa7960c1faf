#include "injector/nvtx_tool.h"

#include <cstddef>
#include <string>
#include <string_view>

#include "injector/session.h"
#include "common/utf8.h"

// Every callback below runs on an application thread, inside the application's NVTX call. They
// are noexcept with a catch-all: an exception must never unwind into the job (NVTX is C). When
// no session is active (a forked child, see Session) they do nothing and return what NVTX
// returns without a tool.

namespace flopscope::injector {
namespace {

constexpr int kNotTracked = -1;

// Wide text arrives rarely; a temporary string per call avoids thread_local objects with
// destructors (an NVTX call from a late thread_local destructor would find one destroyed).
std::string Wide(const wchar_t* message) {
  std::string text;
  AppendWideAsUtf8(message, &text);
  return text;
}

std::string_view Ascii(const char* message) {
  return message == nullptr ? std::string_view() : std::string_view(message);
}

// `storage` holds converted wide text; the view may point into it.
std::string_view MessageOf(const nvtxEventAttributes_t* attributes, std::string* storage) {
  constexpr size_t kMessageEnd =
      offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (attributes == nullptr || attributes->size < kMessageEnd) return {};
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return Ascii(attributes->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE:
      *storage = Wide(attributes->message.unicode);
      return *storage;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      const auto* registered =
          reinterpret_cast<const RegisteredString*>(attributes->message.registered);
      return registered == nullptr ? std::string_view() : std::string_view(registered->value);
    }
    default:
      return {};
  }
}

// The handles we give out are Domain pointers; NULL is NVTX's default domain.
const Domain* DomainOf(Session* session, nvtxDomainHandle_t handle) {
  return handle == nullptr ? session->domains().Default() : reinterpret_cast<const Domain*>(handle);
}

nvtxDomainHandle_t HandleOf(const Domain* domain) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<Domain*>(domain));
}

// ---- push / pop ----

int PushIn(nvtxDomainHandle_t handle, std::string_view name) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return kNotTracked;
  try {
    return session->tracker().Push(DomainOf(session, handle), name);
  } catch (...) {
    return kNotTracked;
  }
}

int PopIn(nvtxDomainHandle_t handle) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return kNotTracked;
  try {
    return session->tracker().Pop(DomainOf(session, handle));
  } catch (...) {
    return kNotTracked;
  }
}

int NVTX_API RangePushA(const char* message) noexcept { return PushIn(nullptr, Ascii(message)); }
int NVTX_API RangePushW(const wchar_t* message) noexcept {
  try {
    return PushIn(nullptr, Wide(message));
  } catch (...) {
    return kNotTracked;
  }
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* attributes) noexcept {
  try {
    std::string storage;
    return PushIn(nullptr, MessageOf(attributes, &storage));
  } catch (...) {
    return kNotTracked;
  }
}
int NVTX_API RangePop() noexcept { return PopIn(nullptr); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain,
                               const nvtxEventAttributes_t* attributes) noexcept {
  try {
    std::string storage;
    return PushIn(domain, MessageOf(attributes, &storage));
  } catch (...) {
    return kNotTracked;
  }
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) noexcept { return PopIn(domain); }

// ---- start / end ----

nvtxRangeId_t StartIn(nvtxDomainHandle_t handle, std::string_view name) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return 0;
  try {
    return session->tracker().Start(DomainOf(session, handle), name);
  } catch (...) {
    return 0;
  }
}

void EndAny(nvtxRangeId_t id) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return;
  try {
    session->tracker().End(id);
  } catch (...) {
  }
}

nvtxRangeId_t NVTX_API RangeStartA(const char* message) noexcept {
  return StartIn(nullptr, Ascii(message));
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) noexcept {
  try {
    return StartIn(nullptr, Wide(message));
  } catch (...) {
    return 0;
  }
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attributes) noexcept {
  try {
    std::string storage;
    return StartIn(nullptr, MessageOf(attributes, &storage));
  } catch (...) {
    return 0;
  }
}
void NVTX_API RangeEnd(nvtxRangeId_t id) noexcept { EndAny(id); }
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* attributes) noexcept {
  try {
    std::string storage;
    return StartIn(domain, MessageOf(attributes, &storage));
  } catch (...) {
    return 0;
  }
}
// Range ids are unique across domains, so the domain is not needed to find the range.
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t /*domain*/, nvtxRangeId_t id) noexcept {
  EndAny(id);
}

// ---- marks (only the flopscope domain's matter: metadata) ----

void MarkIn(nvtxDomainHandle_t handle, const nvtxEventAttributes_t* attributes) noexcept {
  Session* session = Session::Current();
  if (session == nullptr || handle == nullptr) return;  // default-domain marks carry no metadata
  try {
    const Domain* domain = DomainOf(session, handle);
    if (!domain->is_flopscope) return;
    std::string storage;
    session->tracker().Mark(domain, MessageOf(attributes, &storage));
  } catch (...) {
  }
}

void NVTX_API MarkA(const char* /*message*/) noexcept {}
void NVTX_API MarkW(const wchar_t* /*message*/) noexcept {}
void NVTX_API MarkEx(const nvtxEventAttributes_t* /*attributes*/) noexcept {}
void NVTX_API DomainMarkEx(nvtxDomainHandle_t domain,
                           const nvtxEventAttributes_t* attributes) noexcept {
  MarkIn(domain, attributes);
}

// ---- domains and registered strings ----

nvtxDomainHandle_t CreateDomain(std::string_view raw_name) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return nullptr;
  try {
    std::string name;
    AppendSanitizedUtf8(raw_name, &name);
    return HandleOf(session->domains().Create(name));
  } catch (...) {
    return nullptr;
  }
}

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) noexcept {
  return CreateDomain(Ascii(name));
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) noexcept {
  try {
    return CreateDomain(Wide(name));
  } catch (...) {
    return nullptr;
  }
}
// Domains are shared by every NVTX instance in the process and may still be used elsewhere, so
// destroying one frees nothing.
void NVTX_API DomainDestroy(nvtxDomainHandle_t /*domain*/) noexcept {}

nvtxStringHandle_t RegisterString(nvtxDomainHandle_t handle, std::string_view raw) noexcept {
  Session* session = Session::Current();
  if (session == nullptr) return nullptr;
  try {
    std::string value;
    AppendSanitizedUtf8(raw, &value);
    const RegisteredString* registered =
        session->domains().Register(DomainOf(session, handle), value);
    return reinterpret_cast<nvtxStringHandle_t>(const_cast<RegisteredString*>(registered));
  } catch (...) {
    return nullptr;
  }
}

nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain,
                                                  const char* text) noexcept {
  return RegisterString(domain, Ascii(text));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t domain,
                                                  const wchar_t* text) noexcept {
  try {
    return RegisterString(domain, Wide(text));
  } catch (...) {
    return nullptr;
  }
}

// ---- naming calls: accepted and ignored ----

void NVTX_API NameCategoryA(uint32_t, const char*) noexcept {}
void NVTX_API NameCategoryW(uint32_t, const wchar_t*) noexcept {}
void NVTX_API NameOsThreadA(uint32_t, const char*) noexcept {}
void NVTX_API NameOsThreadW(uint32_t, const wchar_t*) noexcept {}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t, uint32_t, const char*) noexcept {}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t, uint32_t, const wchar_t*) noexcept {}
void NVTX_API Initialize(const void*) noexcept {}

// ---- installation ----

template <typename Fn>
void SetSlot(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn function) {
  // Slots past the instance's table (an older NVTX) or without a pointer are left alone.
  if (table == nullptr || id >= size || table[id] == nullptr) return;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

bool InstallCore(const NvtxExportTableCallbacks* callbacks) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0) return false;
  SetSlot(table, size, NVTX_CBID_CORE_MarkEx, &MarkEx);
  SetSlot(table, size, NVTX_CBID_CORE_MarkA, &MarkA);
  SetSlot(table, size, NVTX_CBID_CORE_MarkW, &MarkW);
  SetSlot(table, size, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
  SetSlot(table, size, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
  SetSlot(table, size, NVTX_CBID_CORE_RangeStartW, &RangeStartW);
  SetSlot(table, size, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
  SetSlot(table, size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  SetSlot(table, size, NVTX_CBID_CORE_RangePushA, &RangePushA);
  SetSlot(table, size, NVTX_CBID_CORE_RangePushW, &RangePushW);
  SetSlot(table, size, NVTX_CBID_CORE_RangePop, &RangePop);
  SetSlot(table, size, NVTX_CBID_CORE_NameCategoryA, &NameCategoryA);
  SetSlot(table, size, NVTX_CBID_CORE_NameCategoryW, &NameCategoryW);
  SetSlot(table, size, NVTX_CBID_CORE_NameOsThreadA, &NameOsThreadA);
  SetSlot(table, size, NVTX_CBID_CORE_NameOsThreadW, &NameOsThreadW);
  return true;
}

bool InstallCore2(const NvtxExportTableCallbacks* callbacks) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) == 0) return false;
  SetSlot(table, size, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &DomainNameCategoryA);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainNameCategoryW, &DomainNameCategoryW);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
  SetSlot(table, size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
  SetSlot(table, size, NVTX_CBID_CORE2_Initialize, &Initialize);
  return true;
}

}  // namespace

int InstallNvtxCallbacks(NvtxGetExportTableFunc_t get_export_table) noexcept {
  if (get_export_table == nullptr) return 0;
  try {
    const auto* callbacks =
        static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) {
      return 0;
    }
    if (!InstallCore(callbacks) || !InstallCore2(callbacks)) return 0;
    const auto* version =
        static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
    if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
        version->SetInjectionNvtxVersion != nullptr) {
      version->SetInjectionNvtxVersion(NVTX_VERSION);
    }
    return 1;
  } catch (...) {
    return 0;
  }
}

}  // namespace flopscope::injector
