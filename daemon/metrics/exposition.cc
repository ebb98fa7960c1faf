#include "daemon/metrics/exposition.h"

#include <prometheus/text_serializer.h>

#include <utility>

#include "common/utf8.h"

namespace flopscope::daemon::metrics {

std::string LabelValue(std::string_view text) {
  std::string valid;
  AppendSanitizedUtf8(text, &valid);
  TruncateUtf8(kMaxLabelValueBytes, &valid);
  return valid;
}

prometheus::MetricFamily Family(std::string name, prometheus::MetricType type, std::string help) {
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {}};
}

void AddSample(prometheus::MetricFamily* family, Labels labels, double value) {
  prometheus::ClientMetric& sample = family->metric.emplace_back();
  for (prometheus::ClientMetric::Label& label : labels) label.value = LabelValue(label.value);
  sample.label = std::move(labels);
  if (family->type == prometheus::MetricType::Counter) {
    sample.counter.value = value;
  } else {
    sample.gauge.value = value;
  }
}

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace flopscope::daemon::metrics
