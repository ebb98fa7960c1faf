#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/base/logger.h"

namespace flopscope::daemon {

// Where one query's time went, phase by phase, as one debug line at its end
// (`flopscoped --log-level debug`):
//   "GetReport 'job': access 52us catalog 0.3ms read+add 12ms ranks 64 summed_read_us 30100
//    add_us 900 build 1ms (total 13.4ms)"
// (read+add: the ranks' files read on a few threads while this one adds each to the report;
// summed_read_us: the reads' own time added up; add_us: this thread's adding, and writing for
// GetRankReports).
// Spans are wall time (absl::Now), so whatever a phase waited for (a lock, the CPU) counts in
// that phase. Costs two clock reads a phase when debug lines are off.
//
// Not thread-safe: one query's thread owns it.
class QuerySpans {
 public:
  QuerySpans(absl::string_view rpc, absl::string_view job) : start_(absl::Now()), last_(start_) {
    if (IsLogged(LogLevel::kDebug)) line_ = absl::StrCat(rpc, " '", job, "':");
  }
  QuerySpans(const QuerySpans&) = delete;
  QuerySpans& operator=(const QuerySpans&) = delete;
  ~QuerySpans() {
    if (!line_.empty()) {
      LogDebug(line_, " (total ", absl::FormatDuration(absl::Now() - start_), ")");
    }
  }

  // Ends the phase that ran since the previous End (or the start).
  void End(absl::string_view phase) {
    const absl::Time now = absl::Now();
    if (!line_.empty()) absl::StrAppend(&line_, " ", phase, " ", absl::FormatDuration(now - last_));
    last_ = now;
  }
  // Adds a figure to the line ("ranks 64").
  void Note(absl::string_view name, int64_t value) {
    if (!line_.empty()) absl::StrAppend(&line_, " ", name, " ", value);
  }

 private:
  const absl::Time start_;
  absl::Time last_;
  std::string line_;  // empty when debug lines are not logged
};

}  // namespace flopscope::daemon
