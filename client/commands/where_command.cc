// `flopscope where JOB` (where_command.h).
#include "client/commands/where_command.h"

#include "absl/strings/str_cat.h"
#include "client/connect/daemon_client.h"
#include "client/documents/output_file.h"
#include "client/model/open_range_places.h"
#include "client/text/where_view.h"
#include "common/job_id.h"

namespace flopscope::client {

absl::Status WhereCommand(const WhereOptions& options) {
  if (options.format != "text" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", options.format, "' is not known (use text or json)"));
  }
  if (std::string problem = JobIdProblem(options.job_id); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", options.job_id, "': ", problem));
  }
  const DaemonClient daemon(options.socket, options.tls);
  absl::StatusOr<flopscope::v1::OpenRangesResponse> open = daemon.GetOpenRanges(options.job_id);
  if (!open.ok()) return open.status();
  const WhereAnswer answer = PlaceRanks(*open);
  return WriteOutput("", options.format == "json" ? RenderWhereJson(options.job_id, answer)
                                                  : RenderWhereText(options.job_id, answer));
}

}  // namespace flopscope::client
