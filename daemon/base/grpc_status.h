#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace flopscope::daemon {

// The same code and message as a grpc::Status (the two enums share their numbering).
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace flopscope::daemon
