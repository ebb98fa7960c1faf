#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/mutex.h"
#include "common/spool/spool_file.h"
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
//
// With a spool, Submit writes every batch into the session's spool file before queueing it (a
// write-ahead log; no fsync: the page cache outlives the process, not the machine), so a process
// killed by SIGKILL leaves every batch the daemon had not acknowledged in an orphaned file that
// the user's next process or flopscoped's collector delivers, deduplicated by (session, seq).
// The file is cut back to its hello whenever the queue empties, and compacted (CompactLocked)
// when acknowledged frames pile up behind a queue that never empties.
class GrpcTransport {
 public:
  static constexpr uint64_t kDefaultMaxPendingBytes = 256ull << 20;
  static constexpr uint32_t kDefaultReconnectInitialMs = 100;
  static constexpr uint32_t kDefaultReconnectMaxMs = 5000;
  static constexpr const char* kRejectedSeqKey = "flopscope-rejected-seq";
  static constexpr const char* kRefusalReasonKey = "flopscope-refusal-reason";
  // How long stopping waits for the daemon to end a stream before cancelling it.
  static constexpr int kGracefulCloseMs = 500;
  // Below this, acknowledged frames stay in the spool file until the queue empties (which cuts
  // the file back to its hello) or room runs out.
  static constexpr uint64_t kCompactAtBytes = 4ull << 20;

  // Null, with the reason in *error, when the options are unusable. A transport returned with a
  // non-empty *error works without a spool (the directory is unusable): *error says why.
  static std::unique_ptr<GrpcTransport> Create(const fs_transport_options& options,
                                               const fs_hello& hello, std::string* error);
  ~GrpcTransport();  // stops both threads; does not flush
  GrpcTransport(const GrpcTransport&) = delete;
  GrpcTransport& operator=(const GrpcTransport&) = delete;

  void Submit(const fs_batch& batch) FS_EXCLUDES(submit_mutex_, mutex_);
  bool Flush(int64_t timeout_ms) FS_EXCLUDES(mutex_);
  fs_transport_stats Stats() FS_EXCLUDES(mutex_);
  bool PollControl(fs_control* out) FS_EXCLUDES(mutex_);
  void ReplyControl(uint64_t id, bool accepted, std::string_view message) FS_EXCLUDES(mutex_);
  // Writes the unacknowledged batches still in memory to the spool file; returns the records
  // waiting there and its path. 0 when there is no spool (or no room in it).
  uint64_t SpoolPending(std::string* path) FS_EXCLUDES(mutex_);
  // Whether a spool file of `bytes` (`empty` of them its hello) whose unacknowledged frames take
  // `live` should drop its acknowledged ones before a frame of `next` bytes is appended: when
  // they take as much as the live ones (past kCompactAtBytes), so that copying costs at most
  // what it frees, or when the next frame would not fit otherwise.
  static bool ShouldCompact(uint64_t bytes, uint64_t empty, uint64_t live, uint64_t next,
                            uint64_t max_bytes);
  // How often the spool file was compacted (for tests).
  uint64_t compactions() FS_EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    return compactions_;
  }

 private:
  GrpcTransport(std::string target, uint64_t max_pending_bytes, uint32_t initial_backoff_ms,
                uint32_t max_backoff_ms, v1::UpMessage hello, std::string spool_dir,
                uint64_t max_spool_bytes);

  // `memory` receives what the message holds (its arena), the figure the pending bound counts.
  static std::shared_ptr<const v1::UpMessage> Encode(const fs_batch& batch, uint64_t seq,
                                                     bool drop_records,
                                                     const TransportLosses& losses,
                                                     uint64_t* memory);
  // At exit, for batches the spool could not take: their definitions alone under their own seqs
  // (the spooled batches after them use those paths and strings), then one last batch, final,
  // carrying the loss counters with their records as EXIT_UNDELIVERED: the store counts them.
  void SpoolExitLossesLocked(SpoolFile* spool) FS_REQUIRES(mutex_);
  // The session's spool file, created on first use; null when there is no spool.
  SpoolFile* SpoolLocked() FS_REQUIRES(mutex_);
  // Writes `message` ahead into the spool file as *pending's frame (pending->logged); false when
  // there is no spool or no room in it.
  bool LogLocked(const v1::UpMessage& message, PendingBatch* pending) FS_REQUIRES(mutex_);
  // Drops the acknowledged frames from the spool file when ShouldCompact says so.
  void CompactLocked(SpoolFile* spool, uint64_t next_frame_bytes) FS_REQUIRES(mutex_);
  // Delivers the spool files that ended processes of this user left. Runs once per process, on
  // replay_thread_, so that our own stream is not held up by it.
  void ReplayOrphans() FS_EXCLUDES(mutex_);
  // One orphan over its own stream, as its session; true when the daemon committed all of it.
  bool ReplayOrphan(const SpoolFile& orphan) FS_EXCLUDES(mutex_);
  using Stream = grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>;

  // Every function below that talks to the network runs without mutex_ (FS_EXCLUDES): a write
  // or read may block for as long as the daemon takes.
  void ConnectionLoop() FS_EXCLUDES(mutex_);
  // One stream from connect to end; true when the daemon welcomed us.
  bool RunStream(bool* retry_at_once) FS_EXCLUDES(mutex_);
  // Waits one backoff step for the channel to connect; false when it did not.
  bool WaitForChannel();
  // Publishes the stream's context for TryCancel on stop; false when stopping already.
  bool AttachContext(grpc::ClientContext* context) FS_EXCLUDES(mutex_);
  void DetachContext() FS_EXCLUDES(mutex_);
  // Drops what the daemon committed and marks the stream connected.
  void ApplyWelcome(const v1::Welcome& welcome) FS_EXCLUDES(mutex_);
  // Runs a welcomed stream: the reader thread and the writer, until either ends or we stop.
  void ServeStream(Stream* stream, grpc::ClientContext* context) FS_EXCLUDES(mutex_);
  // On stop: half-closes the stream and gives the daemon kGracefulCloseMs to end it.
  void CloseGracefully(Stream* stream, grpc::ClientContext* context) FS_EXCLUDES(mutex_);
  void WriteLoop(Stream* stream) FS_EXCLUDES(mutex_);
  void ReadLoop(Stream* stream) FS_EXCLUDES(mutex_);
  // Keeps the daemon's reason for refusing batches (a stream that ended with a refusal trailer).
  void NoteRefusal(const grpc::Status& status, const grpc::ClientContext& context)
      FS_EXCLUDES(mutex_);
  // Applies a rejection named in the trailers; true when a batch was dropped.
  bool HandleRejection(const grpc::Status& status, const grpc::ClientContext& context)
      FS_EXCLUDES(mutex_);
  void SleepBackoff(uint32_t ms) FS_EXCLUDES(mutex_);
  // Waits on `cv` until *flag (a field guarded by mutex_) is set or `deadline` passes; returns
  // *flag.
  bool WaitUntilLocked(CondVar* cv, const bool* flag,
                       std::chrono::steady_clock::time_point deadline) FS_REQUIRES(mutex_);
  // A Progress to write before batch `seq` when more batches wait behind it and it announces
  // records the daemon has not heard of (collector.proto); empty otherwise.
  std::optional<v1::UpMessage> ProgressBeforeLocked(uint64_t seq) FS_REQUIRES(mutex_);
  // Whether WriteLoop has something to do (or must return).
  bool WriterHasWorkLocked() FS_REQUIRES(mutex_);

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

  Mutex submit_mutex_;  // see Submit; taken before mutex_, never after
  // Guards everything below. Never held across a network call: writes copy a shared_ptr out
  // and release it first.
  Mutex mutex_;
  CondVar writer_wake_;  // new batch, reply, stream end, stop
  CondVar acked_;        // acks and rejections (Flush waits on it)
  CondVar stopped_;      // the connection thread finished (destructor waits)
  PendingQueue pending_ FS_GUARDED_BY(mutex_);
  uint64_t next_seq_ FS_GUARDED_BY(mutex_) = 1;
  uint64_t last_sent_seq_ FS_GUARDED_BY(mutex_) = 0;  // on the current stream
  TransportLosses losses_ FS_GUARDED_BY(mutex_);
  // The loss counters of the latest batch submitted (the core's cumulative figures and ours),
  // for the batch SpoolPending writes last when batches are left in memory.
  google::protobuf::RepeatedPtrField<v1::LossCounter> last_losses_ FS_GUARDED_BY(mutex_);
  // Every record that entered the queue this session, less those the daemon rejected; and how
  // many of them the current stream announced (UpMessage.progress).
  uint64_t records_queued_ FS_GUARDED_BY(mutex_) = 0;
  uint64_t records_announced_ FS_GUARDED_BY(mutex_) = 0;
  fs_transport_stats stats_ FS_GUARDED_BY(mutex_) = {};
  uint64_t welcomes_ FS_GUARDED_BY(mutex_) = 0;
  bool stopping_ FS_GUARDED_BY(mutex_) = false;
  bool stream_ended_ FS_GUARDED_BY(mutex_) = false;
  bool connection_done_ FS_GUARDED_BY(mutex_) = false;
  // For TryCancel on stop.
  grpc::ClientContext* active_context_ FS_GUARDED_BY(mutex_) = nullptr;
  std::deque<fs_control> controls_ FS_GUARDED_BY(mutex_);
  std::deque<v1::UpMessage> replies_ FS_GUARDED_BY(mutex_);
  const std::string spool_dir_;  // empty: no spool
  const uint64_t max_spool_bytes_;
  std::unique_ptr<SpoolFile> spool_ FS_GUARDED_BY(mutex_);
  bool spool_failed_ FS_GUARDED_BY(mutex_) = false;  // the file could not be created
  uint64_t compactions_ FS_GUARDED_BY(mutex_) = 0;   // for tests
  bool orphans_checked_ = false;                     // connection thread only
  grpc::ClientContext* replay_context_ FS_GUARDED_BY(mutex_) = nullptr;  // for TryCancel on stop
  std::thread replay_thread_;  // started by the connection thread, joined by the destructor

  std::thread connection_thread_;
};

}  // namespace flopscope::transport
