#include "importer/range_role.h"

#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace flopscope::importer {
namespace {

constexpr absl::string_view kProfilerStep = "ProfilerStep#";

// "## forward ##" -> "forward": the decoration PyTorch users put on record_function labels.
absl::string_view Undecorated(absl::string_view name) {
  name = absl::StripAsciiWhitespace(name);
  while (absl::ConsumePrefix(&name, "#")) {
  }
  while (absl::ConsumeSuffix(&name, "#")) {
  }
  return absl::StripAsciiWhitespace(name);
}

}  // namespace

AnnotationRole ClassifyAnnotation(absl::string_view name) {
  AnnotationRole result;
  if (absl::StartsWith(name, kProfilerStep)) {
    const absl::string_view digits = name.substr(kProfilerStep.size());
    int64_t number = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error == std::errc() && end == digits.data() + digits.size() && number >= 0) {
      result.role = RangeRole::kStep;
      result.flopscope_name = kStepRange;
      result.step_number = number;
    }
    return result;
  }
  const absl::string_view bare = Undecorated(name);
  for (absl::string_view phase : {"forward", "backward", "optimizer"}) {
    if (absl::EqualsIgnoreCase(bare, phase)) {
      result.role = RangeRole::kPhase;
      result.flopscope_name = phase;
      return result;
    }
  }
  if (absl::StartsWith(name, "Optimizer.step#")) {
    result.role = RangeRole::kPhase;
    result.flopscope_name = "optimizer";
  }
  return result;
}

}  // namespace flopscope::importer
