#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::importer {

// One Collector.Stream to the daemon, used the simple way: hello, then one batch at a time,
// each acknowledged before the next is sent (an import is a batch job; there is nothing to
// overlap). The importer is not inside a training job, so it talks gRPC directly rather than
// through the injector's dlmopen'ed transport.
//
// Errors: UNAVAILABLE when the daemon cannot be reached (with the target and a hint), the
// daemon's own message when it refuses the hello or rejects a batch (INVALID_ARGUMENT), and
// DEADLINE_EXCEEDED when it stops answering.
//
// Not thread-safe: one importer thread drives it.
class CollectorSender {
 public:
  // Connects and says hello; `committed_seq()` then tells what the daemon already has of this
  // session. `timeout` bounds the whole stream.
  // `credentials`: tls::ClientCredentials (mutual TLS to a --server, else none).
  static absl::StatusOr<std::unique_ptr<CollectorSender>> Connect(
      const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
      const v1::SessionHello& hello, absl::Duration timeout);
  ~CollectorSender();
  CollectorSender(const CollectorSender&) = delete;
  CollectorSender& operator=(const CollectorSender&) = delete;

  uint64_t committed_seq() const { return committed_seq_; }

  // Sends one batch and waits until the daemon acknowledges it as committed.
  absl::Status Send(const v1::Batch& batch);
  // Half-closes the stream and returns the daemon's final status.
  absl::Status Finish();

 private:
  CollectorSender(std::string target, std::shared_ptr<grpc::ChannelCredentials> credentials,
                  absl::Duration timeout);
  absl::Status Start(const v1::SessionHello& hello);
  // The stream broke: collects the daemon's status and phrases it for the user.
  absl::Status Broken(absl::string_view while_doing);

  const std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>> stream_;
  uint64_t committed_seq_ = 0;
  bool finished_ = false;
};

}  // namespace flopscope::importer
