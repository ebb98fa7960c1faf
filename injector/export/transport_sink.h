#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "injector/export/batch_sink.h"
#include "injector/export/thread_affinity.h"
#include "injector/export/transport_loader.h"
#include "injector/records/identity.h"

namespace flopscope::injector {

// Sends batches to the daemon through libflopscope_transport.so (gRPC, own link namespace).
//
// Thread rule, checked: the thread that calls Open (the exporter's) is the only one that may call
// anything after it (transport_abi.h says why). A call from any other thread is refused, counted
// in wrong_thread_calls() and warned about once; a refused Submit's records count as undelivered.
class TransportSink : public BatchSink {
 public:
  // While the daemon was never reachable, the exit wait is capped at this.
  static constexpr uint32_t kUnreachableExitTimeoutMs = 1000;

  // What the transport may hold: memory for unacknowledged batches (its share of
  // FLOPSCOPE_BUFFER_MB) and the spool on disk (FLOPSCOPE_SPOOL_MB; no spool when dir is empty).
  struct Limits {
    uint64_t max_pending_bytes = 0;
    std::string spool_dir;
    uint64_t max_spool_bytes = 0;
    // Why spool_dir is empty, for the exit line ("FLOPSCOPE_SPOOL_MB=0", a refused directory).
    std::string spool_off_reason;
  };

  TransportSink(std::string library_path, std::string target, SessionIdentity identity,
                std::string gpu_status, Limits limits);
  ~TransportSink() override;

  bool Open(std::string* error) override;
  void Submit(const fs_batch& batch, uint64_t records) override;
  DeliveryOutcome Finish(uint32_t exit_timeout_ms) override;
  bool PollControl(fs_control* out) override;
  void ReplyControl(uint64_t id, bool accepted, std::string_view message) override;
  std::string Destination() const override { return target_; }

  // Calls refused because they came from a thread other than Open's.
  uint64_t wrong_thread_calls() const { return exporter_thread_.refused(); }

 private:
  const std::string library_path_;
  const std::string target_;
  const SessionIdentity identity_;
  const std::string gpu_status_;
  const Limits limits_;
  // Why there is no spool (limits_, or the transport's "no spool: ..." at Open); empty: one is on.
  std::string spool_off_;
  std::unique_ptr<TransportLoader> loader_;
  fs_transport* transport_ = nullptr;
  // Record count of every submitted batch, in order, to tell at exit how many records sit in
  // batches the daemon never acknowledged.
  ThreadAffinity exporter_thread_;
  std::atomic<uint64_t> refused_records_{0};  // records of Submit calls refused (wrong thread)
};

}  // namespace flopscope::injector
