#pragma once

// The families of /metrics in prometheus-cpp's data model: prometheus::MetricFamily, written in
// the text exposition format 0.0.4 by prometheus-cpp's TextSerializer (`# HELP`, `# TYPE`, one
// line per sample, label values escaped). The registry and the forwarding figures build their
// families when scraped, from the figures they keep, as a prometheus::Collectable does, rather
// than holding prometheus-cpp Gauge and Counter objects: the registry drops whole ranks to stay
// within --metrics-max-ranks and keeps dcgm-exporter's label order (hostname, gpu, UUID, job,
// rank), which prometheus::Family<T>::Add would sort by name.
//
// Names and HELP texts are ours, fixed at compile time (prometheus-cpp 1.0 writes HELP as given:
// one line, no backslash). Label values come from producers (host, job id): AddSample makes them
// valid UTF-8 and bounds them.

#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

namespace flopscope::daemon::metrics {

// Label values longer than this (in bytes, cut at a UTF-8 boundary) are truncated: a producer's
// host name or job id cannot make a scrape arbitrarily large.
inline constexpr size_t kMaxLabelValueBytes = 256;

// The content type a /metrics answer carries.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// (name, value) pairs in the order they are written.
using Labels = std::vector<prometheus::ClientMetric::Label>;

// `text` as a label value: ill-formed UTF-8 replaced by U+FFFD, cut to kMaxLabelValueBytes.
std::string LabelValue(std::string_view text);

// A family without samples.
prometheus::MetricFamily Family(std::string name, prometheus::MetricType type, std::string help);
// Appends a sample to `family`: its counter's or gauge's value, by the family's type; every label
// value through LabelValue.
void AddSample(prometheus::MetricFamily* family, Labels labels, double value);
// The exposition text of `families`, in their order (prometheus::TextSerializer).
std::string Serialize(const std::vector<prometheus::MetricFamily>& families);

}  // namespace flopscope::daemon::metrics
