#include "injector/export/transport_loader.h"

#include <dlfcn.h>
#include <link.h>

namespace flopscope::injector {
namespace {

std::string DlError() {
  const char* message = dlerror();
  return message == nullptr ? "unknown error" : message;
}

}  // namespace

std::string TransportLoader::DefaultPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&TransportLoader::DefaultPath), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "libflopscope_transport.so";
  }
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : self.substr(0, slash);
  return directory + "/libflopscope_transport.so";
}

std::unique_ptr<TransportLoader> TransportLoader::Load(const std::string& path,
                                                       std::string* error) {
  void* handle = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *error = "cannot load the transport library " + path + ": " + DlError();
    return nullptr;
  }
  Lmid_t namespace_id = 0;
  if (dlinfo(handle, RTLD_DI_LMID, &namespace_id) != 0) {
    *error = "cannot find the transport's link namespace: " + DlError();
    return nullptr;
  }
  void* libc = dlmopen(namespace_id, "libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto* ctype_init =
      libc == nullptr ? nullptr : reinterpret_cast<void (*)()>(dlsym(libc, "__ctype_init"));
  if (ctype_init == nullptr) {
    *error = "cannot find __ctype_init in the transport's libc: " + DlError();
    return nullptr;
  }
  ctype_init();  // before the first call into the namespace from this thread
  using EntryPoint = const fs_transport_api* (*)();
  auto* entry = reinterpret_cast<EntryPoint>(dlsym(handle, "flopscope_transport_api"));
  if (entry == nullptr) {
    *error = path + " has no flopscope_transport_api: " + DlError();
    return nullptr;
  }
  const fs_transport_api* api = entry();
  if (api == nullptr || api->abi_version != FS_TRANSPORT_ABI_VERSION) {
    *error = path + " speaks transport ABI " +
             (api == nullptr ? std::string("none") : std::to_string(api->abi_version)) +
             ", this injector " + std::to_string(FS_TRANSPORT_ABI_VERSION);
    return nullptr;
  }
  return std::unique_ptr<TransportLoader>(new TransportLoader(handle, ctype_init, api));
}

void TransportLoader::PrepareThisThread() const { ctype_init_(); }

}  // namespace flopscope::injector
