// The C face of libflopscope_transport.so (transport_abi.h): the one exported symbol. Every
// entry point catches everything, since the caller lives in another link namespace and cannot
// unwind our exceptions.

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "injector/transport/grpc_transport.h"
#include "injector/transport/transport_abi.h"

using flopscope::transport::GrpcTransport;

struct fs_transport {
  std::unique_ptr<GrpcTransport> impl;
};

namespace {

void CopyError(const std::string& message, char* err, size_t err_size) {
  if (err == nullptr || err_size == 0) return;
  std::snprintf(err, err_size, "%s", message.c_str());
}

fs_transport* Create(const fs_transport_options* options, const fs_hello* hello, char* err,
                     size_t err_size) {
  try {
    if (options == nullptr || hello == nullptr) {
      CopyError("options and hello are required", err, err_size);
      return nullptr;
    }
    std::string error;
    auto impl = GrpcTransport::Create(*options, *hello, &error);
    if (impl == nullptr) {
      CopyError(error, err, err_size);
      return nullptr;
    }
    return new fs_transport{std::move(impl)};
  } catch (const std::exception& e) {
    CopyError(e.what(), err, err_size);
  } catch (...) {
    CopyError("unknown error", err, err_size);
  }
  return nullptr;
}

void Submit(fs_transport* t, const fs_batch* batch) {
  if (t == nullptr || batch == nullptr) return;
  try {
    t->impl->Submit(*batch);
  } catch (...) {
  }
}

int Flush(fs_transport* t, int64_t timeout_ms) {
  if (t == nullptr) return 0;
  try {
    return t->impl->Flush(timeout_ms) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

void GetStats(fs_transport* t, fs_transport_stats* out) {
  if (out == nullptr) return;
  *out = fs_transport_stats{};
  if (t == nullptr) return;
  try {
    *out = t->impl->Stats();
  } catch (...) {
  }
}

int PollControl(fs_transport* t, fs_control* out) {
  if (t == nullptr || out == nullptr) return 0;
  try {
    return t->impl->PollControl(out) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

void ReplyControl(fs_transport* t, uint64_t id, int accepted, fs_str message) {
  if (t == nullptr) return;
  try {
    t->impl->ReplyControl(id, accepted != 0,
                          message.data == nullptr ? std::string_view()
                                                  : std::string_view(message.data, message.size));
  } catch (...) {
  }
}

uint64_t Spool(fs_transport* t, char* path, size_t path_size) {
  if (path != nullptr && path_size > 0) path[0] = '\0';
  if (t == nullptr) return 0;
  try {
    std::string spool_path;
    const uint64_t records = t->impl->SpoolPending(&spool_path);
    CopyError(spool_path, path, path_size);
    return records;
  } catch (...) {
    return 0;
  }
}

void Destroy(fs_transport* t) {
  try {
    delete t;
  } catch (...) {
  }
}

constexpr fs_transport_api kApi = {FS_TRANSPORT_ABI_VERSION,
                                   &Create,
                                   &Submit,
                                   &Flush,
                                   &GetStats,
                                   &PollControl,
                                   &ReplyControl,
                                   &Destroy,
                                   &Spool};

}  // namespace

extern "C" __attribute__((visibility("default"))) const fs_transport_api* flopscope_transport_api(
    void) {
  return &kApi;
}
