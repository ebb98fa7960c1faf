#include "client/commands/kernels_command.h"

#include "absl/strings/str_cat.h"
#include "client/connect/daemon_client.h"
#include "client/documents/output_file.h"
#include "client/documents/report_json.h"
#include "client/text/report_text.h"

namespace flopscope::client {

absl::Status KernelsCommand(const ReportOptions& options, flopscope::v1::ReportRequest request) {
  if (options.format != "text" && options.format != "json" && options.format != "tree") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kernels prints text or json, not --format ", options.format));
  }
  if (options.top_kernels < 1 || options.top_kernels > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--top-kernels ", options.top_kernels, ": expected 1 to 100000"));
  }
  request.set_kernels_of(options.kernels_of);
  request.set_top_kernels(static_cast<uint32_t>(options.top_kernels));
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<flopscope::v1::Report> report = daemon.GetReport(request);
  if (!report.ok()) return report.status();
  const std::string text =
      options.format == "json" ? RenderReportJson(*report) : RenderTopKernelsText(*report);
  return WriteOutput(options.output, text);
}

}  // namespace flopscope::client
