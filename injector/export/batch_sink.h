#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "injector/transport/transport_abi.h"

namespace flopscope::injector {

// What became of the records after the final batch.
struct DeliveryOutcome {
  uint64_t undelivered_records = 0;  // lost for good, each record counted once
  std::string reason;                // why, by cause, when undelivered_records > 0
  uint64_t spooled_records = 0;      // not acknowledged yet, kept on disk for later delivery
  std::string spool_path;            // where, when spooled_records > 0
  // The job id the daemon stored the records under when the process's own id belongs to another
  // user (the run was kept apart); empty otherwise.
  std::string stored_as_job_id;
};

// Where the exporter sends batches: the gRPC transport, a debug dump, or a test double. Every
// method runs on the exporter thread only (the transport's per-thread libc state is prepared on
// that thread alone).
class BatchSink {
 public:
  virtual ~BatchSink() = default;

  // Called once before anything else; false (reason in *error) when the sink cannot work.
  virtual bool Open(std::string* error) = 0;
  // `records` counts the batch's records (ranges, kernels, metadata), not its definitions.
  virtual void Submit(const fs_batch& batch, uint64_t records) = 0;
  // After the final batch: waits (bounded by exit_timeout_ms) for delivery and tells what was not
  // delivered. The sink is not used afterwards.
  virtual DeliveryOutcome Finish(uint32_t exit_timeout_ms) = 0;
  // Commands from the daemon; the default sink has none.
  virtual bool PollControl(fs_control* /*out*/) { return false; }
  virtual void ReplyControl(uint64_t /*id*/, bool /*accepted*/, std::string_view /*message*/) {}
  // Where batches go, for messages ("unix:/run/flopscope/flopscope.sock").
  virtual std::string Destination() const = 0;
};

}  // namespace flopscope::injector
