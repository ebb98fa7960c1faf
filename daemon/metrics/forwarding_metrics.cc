// The forwarding families of /metrics: outbox depth, drops, lag, streams upstream.
#include "daemon/metrics/forwarding_metrics.h"

#include <algorithm>
#include <vector>

#include "daemon/metrics/exposition.h"

namespace flopscope::daemon::metrics {
namespace {

prometheus::MetricFamily Unlabelled(const char* name, prometheus::MetricType type, const char* help,
                                    double value) {
  prometheus::MetricFamily family = Family(name, type, help);
  AddSample(&family, {}, value);
  return family;
}

}  // namespace

std::string ForwardingMetricsText(const ForwardingFigures& figures, int64_t now_ns) {
  using prometheus::MetricType;
  const double lag_s =
      figures.oldest_put_ns == 0
          ? 0.0
          : static_cast<double>(std::max<int64_t>(0, now_ns - figures.oldest_put_ns)) / 1e9;
  return Serialize({
      Unlabelled("flopscope_forward_outbox_batches", MetricType::Gauge,
                 "Batches committed on this node and waiting in its outbox for the aggregator's "
                 "acknowledgement (--upstream).",
                 static_cast<double>(figures.outbox_batches)),
      Unlabelled("flopscope_forward_outbox_bytes", MetricType::Gauge,
                 "Encoded bytes of the batches waiting in the outbox (at most --outbox-max-mb).",
                 static_cast<double>(figures.outbox_bytes)),
      Unlabelled("flopscope_forward_dropped_batches_total", MetricType::Counter,
                 "Batches never forwarded: the outbox was full, or the aggregator refused them "
                 "for good. They stay in this node's files.",
                 static_cast<double>(figures.dropped_batches)),
      Unlabelled("flopscope_forward_lag_seconds", MetricType::Gauge,
                 "Forwarding lag: age of the oldest batch in the outbox, i.e. committed on this "
                 "node and not yet acknowledged by the aggregator; 0 when nothing waits.",
                 lag_s),
      Unlabelled("flopscope_forward_streams_connected", MetricType::Gauge,
                 "Streams open to the aggregator, one per forwarded session that is live here or "
                 "has batches waiting.",
                 static_cast<double>(figures.streams_connected)),
  });
}

}  // namespace flopscope::daemon::metrics
