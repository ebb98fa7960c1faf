// The forwarding families of /metrics: outbox depth, drops, lag, streams upstream.
#include "daemon/metrics/forwarding_metrics.h"

#include <algorithm>

#include "daemon/metrics/exposition.h"

namespace flopscope::daemon::metrics {
namespace {

void Gauge(ExpositionWriter& out, const char* name, const char* help, double value) {
  out.Family(name, MetricType::kGauge, help);
  out.Sample(name, {}, value);
}

}  // namespace

std::string ForwardingMetricsText(const ForwardingFigures& figures, int64_t now_ns) {
  ExpositionWriter out;
  Gauge(out, "flopscope_forward_outbox_batches",
        "Batches committed on this node and waiting in its outbox for the aggregator's "
        "acknowledgement (--upstream).",
        static_cast<double>(figures.outbox_batches));
  Gauge(out, "flopscope_forward_outbox_bytes",
        "Encoded bytes of the batches waiting in the outbox (at most --outbox-max-mb).",
        static_cast<double>(figures.outbox_bytes));
  out.Family("flopscope_forward_dropped_batches_total", MetricType::kCounter,
             "Batches never forwarded: the outbox was full, or the aggregator refused them for "
             "good. They stay in this node's files.");
  out.Sample("flopscope_forward_dropped_batches_total", {},
             static_cast<double>(figures.dropped_batches));
  const double lag_s =
      figures.oldest_put_ns == 0
          ? 0.0
          : static_cast<double>(std::max<int64_t>(0, now_ns - figures.oldest_put_ns)) / 1e9;
  Gauge(out, "flopscope_forward_lag_seconds",
        "Forwarding lag: age of the oldest batch in the outbox, i.e. committed on this node and "
        "not yet acknowledged by the aggregator; 0 when nothing waits.",
        lag_s);
  Gauge(out, "flopscope_forward_streams_connected",
        "Streams open to the aggregator, one per forwarded session that is live here or has "
        "batches waiting.",
        static_cast<double>(figures.streams_connected));
  return out.Take();
}

}  // namespace flopscope::daemon::metrics
