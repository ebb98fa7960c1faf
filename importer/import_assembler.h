#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "importer/counter_joiner.h"
#include "importer/import_plan.h"
#include "importer/range_nester.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

struct AssemblyOptions {
  std::string job_id;
  int32_t rank = 0;
  absl::Time now;  // bounds the time window (time_base.h)
};

// Turns what a reader took from one file into what the injector would have sent about that
// process: counter samples joined and converted to FLOPs (CounterJoiner), ranges replayed into
// paths and occurrences (RangeNester), every GPU activity attributed to the innermost module
// range open on its launching thread at launch time (launch found by correlation id; GPU
// annotations for activities without one), a time base chosen (time_base.h), and the hello,
// metadata (import.*) and losses of the session.
//
// The session id is derived from the file's content digest and the rank, so importing the same
// file again resumes or skips the session the daemon already has instead of storing it twice.
class ImportAssembler {
 public:
  static absl::StatusOr<ImportPlan> Assemble(TraceRecording recording,
                                             const AssemblyOptions& options);

 private:
  ImportAssembler(ImportPlan* plan, const AssemblyOptions& options)
      : plan_(*plan), options_(options) {}

  void Attribute(const RangeNester& nester);
  void AssignCountedSteps(const RangeNester& nester);
  absl::Status ChooseTime();
  void AddMetadata(const RangeNester& nester, const CounterJoiner::Result& counters);
  void AddLosses(const RangeNester& nester);
  void BuildHello();
  void Count();

  ImportPlan& plan_;
  const AssemblyOptions& options_;
  std::string time_base_;
};

// "import-<16 hex digits>-r<rank>": stable for the same file content and rank.
std::string ImportSessionId(uint64_t content_digest, int32_t rank);

}  // namespace flopscope::importer
