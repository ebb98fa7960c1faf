#pragma once

// One forwarded session's stream to the aggregator (docs/architecture.md, "Forwarding"): a
// long-lived Collector stream, open while the producer's session is live on this node or has
// batches waiting in the outbox. It sends the session's hello (its resume token upstream, the
// job's owner in the metadata), then each batch as it enters the outbox, at most a window of
// them unacknowledged; every Ack moves the watermark. A failure closes the stream and it is
// reopened with backoff, resuming from the aggregator's Welcome. Controls the aggregator writes
// down the stream (`flopscope profile` there) are relayed to the producer's stream on this node,
// and its ControlReply goes back up: this stream is the only way a Control reaches a producer
// from elsewhere, and it can only name its own session.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/forwarding/outbox.h"
#include "daemon/ingest/session_registry.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon::forwarding {

struct ForwarderOptions {
  absl::Duration retry_min = absl::Milliseconds(100);  // first wait after a failure, doubled
  absl::Duration retry_max = absl::Seconds(5);
  absl::Duration idle_poll = absl::Seconds(1);  // links and sessions looked at least this often
  size_t window = 256;                          // batches sent and not yet acknowledged
  // Batches in flight and no Ack for this long: the stream is given up and reopened (a cut
  // link that TCP has not noticed).
  absl::Duration stall_timeout = absl::Seconds(20);
  // How long a relayed Control waits for the producer's reply (the aggregator's own wait,
  // timeout_ms of `flopscope profile`, is at most 60 s).
  absl::Duration control_timeout = absl::Seconds(60);
};

// Relayed Controls waiting for their producer's reply on one stream, at most.
inline constexpr size_t kMaxRelaysPerLink = 16;

// What every link of a Forwarder shares; all outlive the links.
struct LinkEnvironment {
  Outbox* outbox = nullptr;
  v1::Collector::Stub* stub = nullptr;
  SessionRegistry* local = nullptr;  // this node's live producer streams (Controls go down them)
  std::atomic<int>* connected = nullptr;  // streams with their Welcome, all links
  ForwarderOptions options;
};

class SessionLink {
 public:
  SessionLink(const LinkEnvironment& environment, OutboxSession session);
  ~SessionLink();  // Stop()

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the stream and joins; what is not acknowledged stays in the outbox.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // A batch of the session entered the outbox: send it now.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // The session ended on this node and the aggregator has every batch: the thread is over.
  bool finished() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using UpstreamStream = grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>;
  struct Relay {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // One stream from hello to end: true once the session is over and acknowledged, false to
  // reconnect now (a batch refused for good was dropped), an error to reconnect after backoff.
  absl::StatusOr<bool> ServeStream() ABSL_LOCKS_EXCLUDED(mu_);
  // Sends, acknowledges and relays until the session is over (true) or the stream fails.
  absl::StatusOr<bool> Pump(UpstreamStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes waiting batches until the window is full or none waits.
  absl::Status SendWaiting(UpstreamStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Not live here, nothing in flight, nothing waiting.
  absl::StatusOr<bool> SessionOver() ABSL_LOCKS_EXCLUDED(mu_);
  // The stream's reader: Welcome, Acks and Controls, until the stream ends.
  void ReadLoop(UpstreamStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAcknowledged(uint64_t committed_seq, bool welcome) ABSL_LOCKS_EXCLUDED(mu_);
  void Broke(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // Relays a Control to the producer here; its reply (or why there is none) goes up.
  void RelayControl(const v1::Control& control, UpstreamStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void AwaitRelayed(uint64_t upstream_id, std::shared_ptr<PendingControl> pending,
                    UpstreamStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every relay: those still waiting give up without writing.
  void JoinRelays() ABSL_LOCKS_EXCLUDED(mu_);
  bool WriteUp(UpstreamStream* stream, const v1::UpMessage& message) ABSL_LOCKS_EXCLUDED(write_mu_);
  // The stream's end once the reader has seen it: a batch refused for good is dropped.
  absl::StatusOr<bool> Finish(grpc::ClientContext* context, UpstreamStream* stream,
                              const absl::StatusOr<bool>& outcome);

  const LinkEnvironment env_;
  const OutboxSession session_;
  const SessionKey key_;
  const std::string name_;  // "job J rank R session S", for the log

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;  // a put, an ack, the stream's end
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;                    // logged once per run of failures
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // cancelled by Stop
  // The current stream's state.
  bool welcomed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;  // its Read returned false
  absl::Status broken_why_ ABSL_GUARDED_BY(mu_);
  bool relays_closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> in_flight_ ABSL_GUARDED_BY(mu_);  // seqs sent, not yet acknowledged
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_);        // of the acks, while in flight
  std::vector<Relay> relays_ ABSL_GUARDED_BY(mu_);
  // gRPC allows one Write at a time on a stream: batches (link thread) and ControlReplies
  // (relay threads) take turns.
  absl::Mutex write_mu_;
  bool writes_done_ ABSL_GUARDED_BY(write_mu_) = false;
  std::thread thread_;
};

}  // namespace flopscope::daemon::forwarding
