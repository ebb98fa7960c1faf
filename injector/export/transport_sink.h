#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "injector/export/batch_sink.h"
#include "injector/records/identity.h"
#include "injector/export/transport_loader.h"

namespace flopscope::injector {

// Sends batches to the daemon through libflopscope_transport.so (gRPC, own link namespace).
class TransportSink : public BatchSink {
 public:
  // While the daemon was never reachable, the exit wait is capped at this.
  static constexpr uint32_t kUnreachableExitTimeoutMs = 1000;

  TransportSink(std::string library_path, std::string target, SessionIdentity identity,
                std::string gpu_status);
  ~TransportSink() override;

  bool Open(std::string* error) override;
  void Submit(const fs_batch& batch, uint64_t records) override;
  DeliveryOutcome Finish(uint32_t exit_timeout_ms) override;
  bool PollControl(fs_control* out) override;
  void ReplyControl(uint64_t id, bool accepted, std::string_view message) override;
  std::string Destination() const override { return target_; }

 private:
  const std::string library_path_;
  const std::string target_;
  const SessionIdentity identity_;
  const std::string gpu_status_;
  std::unique_ptr<TransportLoader> loader_;
  fs_transport* transport_ = nullptr;
  // Record count of every submitted batch, in order, to tell at exit how many records sit in
  // batches the daemon never acknowledged.
  std::deque<uint64_t> submitted_records_;
};

}  // namespace flopscope::injector
