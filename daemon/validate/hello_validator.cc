#include "daemon/validate/hello_validator.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/job_id.h"
#include "common/version.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/text_checks.h"

namespace flopscope::daemon {
namespace {

absl::Status CheckText(absl::string_view field, absl::string_view text, size_t max_bytes,
                       EmptyText empty) {
  std::string problem = TextProblem(text, max_bytes, empty);
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("hello: ", field, " ", problem));
}

absl::Status CheckDevices(const v1::SessionHello& hello) {
  if (hello.devices_size() > kMaxDevicesPerSession) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello: ", hello.devices_size(), " devices (at most ", kMaxDevicesPerSession, ")"));
  }
  for (const v1::Device& device : hello.devices()) {
    for (const std::string* text : {&device.name(), &device.chip(), &device.uuid()}) {
      if (absl::Status s = CheckText("device text", *text, kMaxNameBytes, EmptyText::kAllowed);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateHello(const v1::SessionHello& hello) {
  if (hello.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "protocol version ", hello.protocol_version(), " is not supported: this flopscoped ",
        kVersion, " speaks version ", kProtocolVersion, " (upgrade the older side)"));
  }
  if (std::string problem = JobIdProblem(hello.job_id()); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("hello: ", problem));
  }
  if (hello.rank() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hello: rank ", hello.rank(), " is negative"));
  }
  absl::Status status =
      CheckText("session_id", hello.session_id(), kMaxSessionIdBytes, EmptyText::kRejected);
  if (status.ok()) status = CheckText("host", hello.host(), kMaxNameBytes, EmptyText::kAllowed);
  if (status.ok()) {
    status = CheckText("command", hello.command(), kMaxCommandBytes, EmptyText::kAllowed);
  }
  if (status.ok()) {
    status = CheckText("gpu_status", hello.gpu_status(), kMaxNameBytes, EmptyText::kAllowed);
  }
  if (status.ok()) {
    status =
        CheckText("injector_version", hello.injector_version(), kMaxNameBytes, EmptyText::kAllowed);
  }
  if (status.ok()) {
    status =
        CheckText("layout source", hello.layout().source(), kMaxNameBytes, EmptyText::kAllowed);
  }
  if (status.ok()) status = CheckDevices(hello);
  return status;
}

}  // namespace flopscope::daemon
