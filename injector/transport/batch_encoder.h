#pragma once

#include <cstdint>

#include "flopscope/v1/collector.pb.h"
#include "flopscope/v1/records.pb.h"
#include "injector/transport/transport_abi.h"

namespace flopscope::transport {

// Records the transport itself gave up on; added to the core's cumulative counters in every
// batch encoded afterwards (the daemon keeps the maximum per cause, so repeats are harmless).
struct TransportLosses {
  uint64_t daemon_unreachable = 0;  // no room while the daemon was not connected
  uint64_t backlog_full = 0;        // no room while it was connected but behind
  uint64_t rejected = 0;
};

void EncodeHello(const fs_hello& hello, v1::SessionHello* out);

// Encodes a borrowed batch under `seq`. With `drop_records` the ranges, kernels and kernel FLOPs
// are left out (definitions, metadata, counter windows, losses and open ranges are always kept).
// `transport_losses` are added to the batch's own loss counters.
void EncodeBatch(const fs_batch& batch, uint64_t seq, bool drop_records,
                 const TransportLosses& transport_losses, v1::Batch* out);

// The records drop_records leaves out: ranges, kernels and kernel FLOPs.
uint64_t DroppableRecords(const fs_batch& batch);

}  // namespace flopscope::transport
