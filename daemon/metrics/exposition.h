#pragma once

// Prometheus text exposition format 0.0.4 (the format every Prometheus server scrapes): a
// `# HELP` and a `# TYPE` line per metric family, then one line per sample,
// `name{label="value",...} value`. Label values are escaped (`\` -> `\\`, `"` -> `\"`, newline
// -> `\n`), HELP text likewise (`\` and newline). Names are ours, fixed at compile time; values
// of labels come from producers (host, job id) and are made valid UTF-8 and bounded here.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flopscope::daemon::metrics {

enum class MetricType { kCounter, kGauge };

// Label values longer than this (in bytes, cut at a UTF-8 boundary) are truncated: a producer's
// host name or job id cannot make a scrape arbitrarily large.
inline constexpr size_t kMaxLabelValueBytes = 256;

// The content type a /metrics answer carries.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// (name, value) pairs in the order they are written; names must match [a-zA-Z_][a-zA-Z0-9_]*.
using Labels = std::vector<std::pair<std::string_view, std::string>>;

// `text` as a label value: ill-formed UTF-8 replaced by U+FFFD, cut to kMaxLabelValueBytes,
// then `\`, `"` and newline escaped.
std::string EscapeLabelValue(std::string_view text);
// HELP text: `\` and newline escaped.
std::string EscapeHelp(std::string_view text);
// A sample value as Prometheus parses it: shortest round-trip decimal, `+Inf`, `-Inf`, `NaN`.
std::string FormatSampleValue(double value);
// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names (colon: false for label names).
bool IsValidMetricName(std::string_view name, bool colon_allowed = true);

// Appends families and their samples to one text. Samples of a family must follow its Family()
// call without another family in between (the format requires a family's lines to be together).
class ExpositionWriter {
 public:
  void Family(std::string_view name, MetricType type, std::string_view help);
  void Sample(std::string_view name, const Labels& labels, double value);
  size_t samples() const { return samples_; }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
  size_t samples_ = 0;
};

}  // namespace flopscope::daemon::metrics
