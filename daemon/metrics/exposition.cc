#include "daemon/metrics/exposition.h"

#include <charconv>
#include <cmath>

#include "common/utf8.h"

namespace flopscope::daemon::metrics {
namespace {

bool IsNameStart(char c, bool colon_allowed) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (colon_allowed && c == ':');
}

bool IsNameChar(char c, bool colon_allowed) {
  return IsNameStart(c, colon_allowed) || (c >= '0' && c <= '9');
}

void AppendEscaped(std::string_view text, bool quote, std::string* out) {
  for (const char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string EscapeLabelValue(std::string_view text) {
  std::string valid;
  AppendSanitizedUtf8(text, &valid);
  TruncateUtf8(kMaxLabelValueBytes, &valid);
  std::string escaped;
  escaped.reserve(valid.size());
  AppendEscaped(valid, /*quote=*/true, &escaped);
  return escaped;
}

std::string EscapeHelp(std::string_view text) {
  std::string escaped;
  AppendEscaped(text, /*quote=*/false, &escaped);
  return escaped;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

bool IsValidMetricName(std::string_view name, bool colon_allowed) {
  if (name.empty() || !IsNameStart(name[0], colon_allowed)) return false;
  for (const char c : name) {
    if (!IsNameChar(c, colon_allowed)) return false;
  }
  return true;
}

void ExpositionWriter::Family(std::string_view name, MetricType type, std::string_view help) {
  text_.append("# HELP ").append(name).append(" ").append(EscapeHelp(help)).append("\n");
  text_.append("# TYPE ").append(name).append(type == MetricType::kCounter ? " counter\n"
                                                                           : " gauge\n");
}

void ExpositionWriter::Sample(std::string_view name, const Labels& labels, double value) {
  text_.append(name);
  if (!labels.empty()) {
    text_.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_.push_back(',');
      text_.append(labels[i].first).append("=\"");
      text_.append(EscapeLabelValue(labels[i].second)).push_back('"');
    }
    text_.push_back('}');
  }
  text_.append(" ").append(FormatSampleValue(value)).append("\n");
  ++samples_;
}

}  // namespace flopscope::daemon::metrics
