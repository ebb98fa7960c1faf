#include "client/text/jobs_view.h"

#include "absl/strings/str_cat.h"
#include "client/text/human_format.h"
#include "client/text/loss_cause_names.h"
#include "client/text/text_table.h"
#include "common/json/json_writer.h"
#include "common/utf8.h"

namespace flopscope::client {

std::string RenderJobsText(const flopscope::v1::ListJobsResponse& jobs, absl::TimeZone zone) {
  if (jobs.jobs().empty()) return "No jobs recorded yet (record one with: flopscope run -- CMD)\n";
  // lost: records the producers counted as lost; rejected: records of batches the daemon refused
  // (counted by the daemon), detailed under the table.
  TextTable table(
      {"job", "ranks", "connected", "ranges", "kernels", "lost", "rejected", "last seen"});
  std::string rejected;
  for (const auto& job : jobs.jobs()) {
    table.AddRow({job.job_id(), absl::StrCat(job.ranks()), absl::StrCat(job.connected_sessions()),
                  absl::StrCat(job.range_events()), absl::StrCat(job.kernels()),
                  absl::StrCat(job.lost_records()), absl::StrCat(job.rejected_records()),
                  FormatTimestamp(job.last_seen_ns(), zone)});
    if (job.spooled_records() > 0) {
      absl::StrAppend(&rejected, PrintableForTerminal(job.job_id()), ": ",
                      SpooledNote(job.spooled_records()), "\n");
    }
    for (const std::string& apart : job.kept_apart()) {
      absl::StrAppend(&rejected, PrintableForTerminal(job.job_id()),
                      ": another user's run named this job id too; it is kept apart as job ",
                      PrintableForTerminal(apart), " (theirs, not mixed into this one)\n");
    }
    if (job.sessions_without_final() > 0) {
      absl::StrAppend(&rejected, PrintableForTerminal(job.job_id()), ": ",
                      SessionsWithoutFinalNote(job.sessions_without_final()), "\n");
    }
    if (job.rejected_batches() == 0) continue;
    absl::StrAppend(&rejected, PrintableForTerminal(job.job_id()),
                    ": rejected by daemon: ", job.rejected_batches(),
                    job.rejected_batches() == 1 ? " batch / " : " batches / ",
                    job.rejected_records(), job.rejected_records() == 1 ? " record" : " records",
                    " (rules: flopscope report ", PrintableForTerminal(job.job_id()), ")\n");
  }
  return table.Render() + rejected;
}

std::string RenderJobsJson(const flopscope::v1::ListJobsResponse& jobs) {
  JsonWriter json;
  json.BeginObject().Key("jobs").BeginArray();
  for (const auto& job : jobs.jobs()) {
    json.BeginObject();
    json.Key("job").String(job.job_id());
    json.Key("ranks").Uint(job.ranks());
    json.Key("connected").Uint(job.connected_sessions());
    json.Key("ranges").Uint(job.range_events());
    json.Key("kernels").Uint(job.kernels());
    json.Key("lost").Uint(job.lost_records());
    json.Key("rejected_batches").Uint(job.rejected_batches());
    json.Key("rejected_records").Uint(job.rejected_records());
    json.Key("sessions_without_final").Uint(job.sessions_without_final());
    json.Key("spooled").Uint(job.spooled_records());
    json.Key("kept_apart").BeginArray();
    for (const std::string& apart : job.kept_apart()) json.String(apart);
    json.EndArray();
    json.Key("first_seen_ns").Int(job.first_seen_ns());
    json.Key("last_seen_ns").Int(job.last_seen_ns());
    json.EndObject();
  }
  json.EndArray().EndObject();
  return json.Finish();
}

}  // namespace flopscope::client
