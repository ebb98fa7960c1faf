#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::transport::testing {

// An in-process Collector for tests: it stores what arrives, acknowledges each batch like the
// daemon does (committed_seq), and can misbehave on request. Listens on a unix socket.
class FakeCollector final : public v1::Collector::Service {
 public:
  struct Behaviour {
    uint64_t reject_seq = 0;      // reject this batch once (INVALID_ARGUMENT + trailer)
    uint64_t hang_up_at_seq = 0;  // end the stream once when this batch arrives, uncommitted
    bool ack = true;              // false: commit nothing, acknowledge nothing
    bool keep = true;             // false: count batches and records only (benchmarks)
  };

  explicit FakeCollector(std::string socket_path);
  FakeCollector(std::string socket_path, Behaviour behaviour);
  ~FakeCollector() override;

  // "unix:<socket path>"
  std::string target() const { return "unix:" + socket_path_; }

  // Every batch received, duplicates and rejected ones included, in arrival order.
  std::vector<v1::Batch> received();
  // Batches committed (acknowledged), each seq once.
  std::vector<v1::Batch> committed();
  std::vector<v1::SessionHello> hellos();
  std::vector<v1::ControlReply> control_replies();
  uint64_t committed_seq();
  // Range and kernel records received (counted even when not kept).
  uint64_t received_records();
  // Waits until at least `count` batches were committed; false on timeout.
  bool WaitForCommitted(size_t count, std::chrono::milliseconds timeout);
  bool WaitForControlReplies(size_t count, std::chrono::milliseconds timeout);
  // Sends a control on the current stream (after the next message arrives).
  void QueueControl(const v1::Control& control);

  grpc::Status Stream(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::DownMessage, v1::UpMessage>* stream) override;

 private:
  const std::string socket_path_;
  std::unique_ptr<grpc::Server> server_;
  // Guards everything below (stream handlers run on gRPC's threads).
  std::mutex mutex_;
  std::condition_variable changed_;
  Behaviour behaviour_;
  std::vector<v1::Batch> received_;
  std::vector<v1::Batch> committed_;
  std::vector<v1::SessionHello> hellos_;
  std::vector<v1::ControlReply> control_replies_;
  std::vector<v1::Control> controls_to_send_;
  uint64_t committed_seq_ = 0;
  uint64_t received_records_ = 0;
};

// A fresh directory under /tmp for sockets and dumps; removed with its files at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace flopscope::transport::testing
