#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "flopscope/v1/collector.grpc.pb.h"
#include "injector/transport/batch_encoder.h"
#include "injector/transport/pending_queue.h"
#include "injector/transport/transport_abi.h"

namespace flopscope::transport {

// The injector's side of Collector.Stream (gRPC sync bidi). A connection thread keeps a stream
// open for as long as the process lives, reconnecting with backoff: it sends the hello, drops
// what the Welcome says is committed, resends the unacknowledged batches in order, then streams
// new ones. A reader thread per stream applies Acks and queues Controls. All public methods are
// thread-safe and never wait on the network (except Flush, by design).
class GrpcTransport {
 public:
  static constexpr uint64_t kDefaultMaxPendingBytes = 256ull << 20;
  static constexpr uint32_t kDefaultReconnectInitialMs = 100;
  static constexpr uint32_t kDefaultReconnectMaxMs = 5000;
  static constexpr const char* kRejectedSeqKey = "flopscope-rejected-seq";
  // How long stopping waits for the daemon to end a stream before cancelling it.
  static constexpr int kGracefulCloseMs = 500;

  // Null, with the reason in *error, when the options are unusable.
  static std::unique_ptr<GrpcTransport> Create(const fs_transport_options& options,
                                               const fs_hello& hello, std::string* error);
  ~GrpcTransport();  // stops both threads; does not flush
  GrpcTransport(const GrpcTransport&) = delete;
  GrpcTransport& operator=(const GrpcTransport&) = delete;

  void Submit(const fs_batch& batch);
  bool Flush(int64_t timeout_ms);
  fs_transport_stats Stats();
  bool PollControl(fs_control* out);
  void ReplyControl(uint64_t id, bool accepted, std::string_view message);

 private:
  GrpcTransport(std::string target, uint64_t max_pending_bytes, uint32_t initial_backoff_ms,
                uint32_t max_backoff_ms, v1::UpMessage hello);

  static std::shared_ptr<const v1::UpMessage> Encode(const fs_batch& batch, uint64_t seq,
                                                     bool drop_records,
                                                     const TransportLosses& losses);
  void ConnectionLoop();
  // One stream from connect to end; true when the daemon welcomed us.
  bool RunStream(bool* retry_at_once);
  void WriteLoop(grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>* stream);
  void ReadLoop(grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>* stream);
  // Applies a rejection named in the trailers; true when a batch was dropped.
  bool HandleRejection(const grpc::Status& status, const grpc::ClientContext& context);
  void SleepBackoff(uint32_t ms);

  const std::string target_;
  const uint32_t initial_backoff_ms_;
  const uint32_t max_backoff_ms_;
  const v1::UpMessage hello_;
  // Hazard (dlmopen): a thread that this namespace's libc creates on a reused thread stack frees
  // the stack's dynamic-TLS blocks with this libc's free(), although ld.so allocated them with the
  // job's malloc (glibc's get_cached_stack) — the job's heap is corrupted. So the transport must
  // not churn threads. gRPC creates threads whenever it is (re)initialised and whenever a channel's
  // event engine is rebuilt; one grpc_init reference and one channel, both held for the
  // transport's whole life, keep reconnect attempts (a daemon that is away) from creating any.
  const bool grpc_initialized_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Collector::Stub> stub_;

  std::mutex submit_mutex_;  // see Submit
  // Guards everything below. Never held across a network call: writes copy a shared_ptr out
  // and release it first.
  std::mutex mutex_;
  std::condition_variable writer_wake_;  // new batch, reply, stream end, stop
  std::condition_variable acked_;        // acks and rejections (Flush waits on it)
  std::condition_variable stopped_;      // the connection thread finished (destructor waits)
  PendingQueue pending_;
  uint64_t next_seq_ = 1;
  uint64_t last_sent_seq_ = 0;  // on the current stream
  TransportLosses losses_;
  fs_transport_stats stats_{};
  uint64_t welcomes_ = 0;
  bool stopping_ = false;
  bool stream_ended_ = false;
  bool connection_done_ = false;
  grpc::ClientContext* active_context_ = nullptr;  // for TryCancel on stop
  std::deque<fs_control> controls_;
  std::deque<v1::UpMessage> replies_;

  std::thread connection_thread_;
};

}  // namespace flopscope::transport
