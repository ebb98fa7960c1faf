#pragma once

// A node daemon's forwarding figures (`flopscoped --upstream --metrics`) as /metrics families:
// the outbox's depth in batches and bytes, the batches never forwarded, the forwarding lag and
// the streams open upstream. Daemon-wide series without labels: their number does not grow with
// jobs, ranks or sessions.

#include <cstdint>
#include <string>

namespace flopscope::daemon::metrics {

struct ForwardingFigures {
  int64_t outbox_batches = 0;   // committed here, not yet acknowledged by the aggregator
  int64_t outbox_bytes = 0;     // their encoded size
  int64_t dropped_batches = 0;  // never forwarded: outbox full, or refused upstream for good
  int64_t oldest_put_ns = 0;    // when the oldest waiting batch was put (unix ns); 0: none waits
  int streams_connected = 0;    // streams upstream with their Welcome, one per forwarded session
};

// The families, in exposition format 0.0.4 (exposition.h). The lag is `now_ns - oldest_put_ns`
// in seconds (0 when nothing waits, and never negative: a clock step back reads as no lag).
std::string ForwardingMetricsText(const ForwardingFigures& figures, int64_t now_ns);

}  // namespace flopscope::daemon::metrics
