#include "injector/transport/grpc_transport.h"

#include <errno.h>
#include <pthread.h>
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace flopscope::transport {
namespace {

constexpr size_t kMaxQueuedControls = 64;
constexpr size_t kMaxQueuedReplies = 64;
// How many batches an orphan's replay sends ahead of the daemon's acks. The acks must be read as
// they come: a daemon blocked on writing them would stop reading our batches.
constexpr uint64_t kReplayWindow = 32;

// What a rejection or an unacknowledged batch loses (definitions and losses are not records).
uint64_t RecordCount(const v1::Batch& batch) {
  return uint64_t(batch.ranges_size()) + batch.kernels_size() + batch.metadata_size() +
         batch.kernel_flops_size() + batch.windows_size();
}

// A batch with no record, no definition and no end: only cumulative loss counters, and maybe a
// snapshot of open ranges (`flopscope where`).
bool NoRecordsOrDefinitions(const v1::Batch& batch) {
  return RecordCount(batch) == 0 && batch.strings_size() == 0 && batch.paths_size() == 0 &&
         !batch.final();
}

// Only cumulative loss counters: not queued, the next batch carries them. A snapshot of open
// ranges is sent only when it changed, so a batch carrying one is queued while there is room.
bool OnlyLosses(const v1::Batch& batch) {
  return NoRecordsOrDefinitions(batch) && !batch.has_open_ranges();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, uint32_t initial_ms,
                                           uint32_t max_ms) {
  grpc::ChannelArguments args;
  // The channel's own reconnect backoff would otherwise grow to minutes while the daemon is
  // away; keep it within ours so a restarted daemon is found quickly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(initial_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(initial_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(max_ms));
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // resending is ours, by sequence number
  args.SetMaxReceiveMessageSize(4 << 20);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

// The session's resume token (collector.proto): 32 bytes of the kernel's CSPRNG as hex. Only
// the process holding it (and its spool file, 0600 in the user's 0700 directory) can resume the
// session. Empty only when getrandom fails (it blocks rather than fail once the kernel's pool is
// seeded): the daemon then draws one for the first hello, and a reconnect of this session is
// refused, so its batches wait in the spool for the user's next process.
std::string NewResumeToken() {
  unsigned char bytes[32];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string();
    filled += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 15];
  }
  return token;
}

fs_control ControlFrom(const v1::Control& control) {
  fs_control out{};
  out.id = control.id();
  if (control.has_counter_window()) {
    out.kind = FS_CONTROL_COUNTER_WINDOW;
    out.steps = control.counter_window().steps();
    const std::string& metric_set = control.counter_window().metric_set();
    std::strncpy(out.metric_set, metric_set.c_str(), sizeof out.metric_set - 1);
  } else if (control.has_flush()) {
    out.kind = FS_CONTROL_FLUSH;
  }  // else FS_CONTROL_UNKNOWN (0): the exporter refuses it
  return out;
}

}  // namespace

std::unique_ptr<GrpcTransport> GrpcTransport::Create(const fs_transport_options& options,
                                                     const fs_hello& hello, std::string* error) {
  if (options.target.data == nullptr || options.target.size == 0) {
    *error = "no daemon target given";
    return nullptr;
  }
  v1::UpMessage hello_message;
  EncodeHello(hello, hello_message.mutable_hello());
  hello_message.mutable_hello()->set_resume_token(NewResumeToken());
  const uint32_t initial =
      options.reconnect_initial_ms > 0 ? options.reconnect_initial_ms : kDefaultReconnectInitialMs;
  const uint32_t max = std::max(
      initial, options.reconnect_max_ms > 0 ? options.reconnect_max_ms : kDefaultReconnectMaxMs);
  const uint64_t max_pending =
      options.max_pending_bytes > 0 ? options.max_pending_bytes : kDefaultMaxPendingBytes;
  std::string spool_dir;
  if (options.spool_dir.data != nullptr && options.spool_dir.size > 0) {
    spool_dir.assign(options.spool_dir.data, options.spool_dir.size);
    std::string spool_error;
    if (!SpoolFile::PrepareDirectory(spool_dir, &spool_error)) {
      // Not fatal: the records still go to the daemon, only nothing can wait on disk.
      *error = "no spool: " + spool_error;
      spool_dir.clear();
    }
  }
  std::unique_ptr<GrpcTransport> transport(new GrpcTransport(
      std::string(options.target.data, options.target.size), max_pending, initial, max,
      std::move(hello_message), std::move(spool_dir), options.max_spool_bytes));
  {
    // The spool file exists from the start, holding the hello: a process killed before its
    // first batch leaves it behind, so the daemon's collector knows whose session the records
    // in the made-counts file beside it were (common/made_counts_page.h), and counts them there.
    MutexLock lock(&transport->mutex_);
    transport->SpoolLocked();
  }
  transport->connection_thread_ = std::thread([t = transport.get()] { t->ConnectionLoop(); });
  return transport;
}

GrpcTransport::GrpcTransport(std::string target, uint64_t max_pending_bytes,
                             uint32_t initial_backoff_ms, uint32_t max_backoff_ms,
                             v1::UpMessage hello, std::string spool_dir, uint64_t max_spool_bytes)
    : target_(std::move(target)),
      initial_backoff_ms_(initial_backoff_ms),
      max_backoff_ms_(max_backoff_ms),
      hello_(std::move(hello)),
      grpc_initialized_((grpc_init(), true)),
      channel_(MakeChannel(target_, initial_backoff_ms_, max_backoff_ms_)),
      stub_(v1::Collector::NewStub(channel_)),
      pending_(max_pending_bytes),
      spool_dir_(std::move(spool_dir)),
      max_spool_bytes_(max_spool_bytes) {}

GrpcTransport::~GrpcTransport() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    writer_wake_.SignalAll();
    acked_.SignalAll();
    // The connection thread closes an open stream politely (WritesDone) and returns; whatever
    // still blocks after the grace period (a daemon that never answers) is cancelled.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kGracefulCloseMs);
    if (!WaitUntilLocked(&stopped_, &connection_done_, deadline)) {
      if (active_context_ != nullptr) active_context_->TryCancel();  // thread-safe
    }
    // An orphan's replay is resumed by the next process (the daemon dedups by seq): no wait.
    if (replay_context_ != nullptr) replay_context_->TryCancel();
  }
  if (connection_thread_.joinable()) connection_thread_.join();
  if (replay_thread_.joinable()) replay_thread_.join();
  {
    MutexLock lock(&mutex_);
    // A spool that holds nothing unacknowledged is of no use to anyone; otherwise it stays for
    // the next process of this user (closing it releases our lock).
    if (spool_ != nullptr && pending_.spooled_records() == 0 && pending_.empty()) spool_->Remove();
    spool_.reset();
  }
  if (grpc_initialized_) grpc_shutdown();  // the channel and stub are destroyed after this body
}

std::shared_ptr<const v1::UpMessage> GrpcTransport::Encode(const fs_batch& batch, uint64_t seq,
                                                           bool drop_records,
                                                           const TransportLosses& losses,
                                                           uint64_t* memory) {
  // One arena per batch: a batch holds thousands of small messages, and the arena turns their
  // allocations into pointer bumps. The arena lives as long as the message is pending.
  google::protobuf::ArenaOptions options;
  // A batch cut down to its definitions and losses is small: a large first block would make it
  // cost as much memory as a full one.
  options.start_block_size = drop_records ? 1024 : 64 << 10;
  options.max_block_size = 1 << 20;
  auto arena = std::make_shared<google::protobuf::Arena>(options);
  auto* message = google::protobuf::Arena::CreateMessage<v1::UpMessage>(arena.get());
  EncodeBatch(batch, seq, drop_records, losses, message->mutable_batch());
  *memory = arena->SpaceAllocated();
  return std::shared_ptr<const v1::UpMessage>(arena, message);
}

void GrpcTransport::Submit(const fs_batch& batch) {
  // Serialises submitters, so batches enter the queue in sequence order while the encoding
  // itself runs outside mutex_ (acks are not held up by it).
  MutexLock submit_lock(&submit_mutex_);
  uint64_t seq;
  TransportLosses losses;
  {
    MutexLock lock(&mutex_);
    seq = next_seq_++;
    losses = losses_;
  }
  uint64_t bytes = 0;
  std::shared_ptr<const v1::UpMessage> message = Encode(batch, seq, false, losses, &bytes);
  const uint64_t droppable = DroppableRecords(batch);
  MutexLock lock(&mutex_);
  last_losses_ = message->batch().losses();
  // Nothing but losses, which are cumulative: the next batch carries them. Queueing it would let
  // a long outage grow the queue without bound. (The daemon takes a gap in seqs.)
  if (OnlyLosses(message->batch())) return;
  PendingBatch pending;
  pending.seq = seq;
  pending.records = RecordCount(message->batch());
  const bool room = pending_.HasRoomFor(bytes);
  // Hazard: disk I/O under mutex_ (a write of one batch, at most a few MB, to the page cache).
  if (LogLocked(*message, &pending)) {
    if (!room) {  // over the memory bound: the writer reads it back when its turn comes
      pending.in_spool = true;
      message.reset();
      bytes = 0;
    }
  } else if (!room && droppable > 0) {
    // No room on disk either: keep what the daemon needs to make sense of later batches
    // (definitions, metadata, losses), drop the records and say so in this very batch.
    // The cause says whether the daemon was away or connected but behind (campaign: overload
    // was once reported as "daemon unreachable" while the stream was up).
    (stats_.connected ? losses_.backlog_full : losses_.daemon_unreachable) += droppable;
    stats_.records_dropped += droppable;
    stats_.dropped_unreachable += droppable;
    message = Encode(batch, seq, /*drop_records=*/true, losses_, &bytes);
    if (OnlyLosses(message->batch())) return;
    pending.records = RecordCount(message->batch());
    LogLocked(*message, &pending);  // a small batch: it may still fit
  } else if (!room && NoRecordsOrDefinitions(message->batch())) {
    // A snapshot alone with no room in memory or on disk: dropped, so that an outage cannot grow
    // the queue by one a second. Records are being dropped meanwhile too; a later change of the
    // open ranges is sent again.
    return;
  }
  pending.message = std::move(message);
  pending.bytes = bytes;
  records_queued_ += pending.records;
  pending_.Push(std::move(pending));
  ++stats_.batches_submitted;
  writer_wake_.Signal();
}

bool GrpcTransport::LogLocked(const v1::UpMessage& message, PendingBatch* pending) {
  SpoolFile* spool = SpoolLocked();
  if (spool == nullptr) return false;
  CompactLocked(spool, SpoolFile::FrameBytes(static_cast<uint32_t>(message.ByteSizeLong())));
  if (!spool->Append(pending->seq, message, pending->records, &pending->spooled)) return false;
  pending->logged = true;
  return true;
}

bool GrpcTransport::ShouldCompact(uint64_t bytes, uint64_t empty, uint64_t live, uint64_t next,
                                  uint64_t max_bytes) {
  const bool fits = bytes + next <= max_bytes;
  if (fits && bytes < kCompactAtBytes) return false;
  const uint64_t dead = bytes - std::min(bytes, empty + live);
  return dead > 0 && (!fits || dead >= live);
}

void GrpcTransport::CompactLocked(SpoolFile* spool, uint64_t next_frame_bytes) {
  uint64_t live_bytes = 0;
  const std::vector<SpoolFile::Entry*> live = pending_.LoggedEntries(&live_bytes);
  if (!ShouldCompact(spool->bytes(), spool->empty_bytes(), live_bytes, next_frame_bytes,
                     max_spool_bytes_)) {
    return;
  }
  if (spool->Compact(live)) ++compactions_;
}

SpoolFile* GrpcTransport::SpoolLocked() {
  if (spool_ != nullptr || spool_failed_ || spool_dir_.empty()) return spool_.get();
  std::string error;
  spool_ = SpoolFile::Create(spool_dir_, hello_, max_spool_bytes_, &error);
  spool_failed_ = spool_ == nullptr;  // not retried: the reason would not change
  return spool_.get();
}

uint64_t GrpcTransport::SpoolPending(std::string* path) {
  MutexLock lock(&mutex_);
  SpoolFile* spool = SpoolLocked();
  if (spool == nullptr) return 0;
  pending_.SpoolInMemory([spool](const PendingBatch& batch, SpoolFile::Entry* entry) {
    if (batch.logged) {  // written ahead already: only its memory goes
      *entry = batch.spooled;
      return true;
    }
    return spool->Append(batch.seq, *batch.message, batch.records, entry);
  });
  if (pending_.bytes() > 0) SpoolExitLossesLocked(spool);  // some stayed in memory
  *path = spool->path();
  return pending_.spooled_records();
}

void GrpcTransport::SpoolExitLossesLocked(SpoolFile* spool) {
  const uint64_t lost = pending_.records() - pending_.spooled_records();
  pending_.ForEachInMemory([spool](const PendingBatch& pending) {
    const v1::Batch& batch = pending.message->batch();
    if (batch.strings_size() == 0 && batch.paths_size() == 0) return;
    v1::UpMessage definitions;
    *definitions.mutable_batch()->mutable_strings() = batch.strings();
    *definitions.mutable_batch()->mutable_paths() = batch.paths();
    definitions.mutable_batch()->set_seq(pending.seq);
    spool->AppendLast(pending.seq, definitions);
  });
  v1::UpMessage last;
  v1::Batch* batch = last.mutable_batch();
  batch->set_seq(next_seq_++);
  batch->set_final(true);
  *batch->mutable_losses() = last_losses_;
  // Ours may have grown since that batch was encoded (a later batch's records dropped).
  for (v1::LossCounter& loss : *batch->mutable_losses()) {
    if (loss.cause() == v1::LOSS_CAUSE_DAEMON_UNREACHABLE) {
      loss.set_records(losses_.daemon_unreachable);
    } else if (loss.cause() == v1::LOSS_CAUSE_BACKLOG_FULL) {
      loss.set_records(losses_.backlog_full);
    } else if (loss.cause() == v1::LOSS_CAUSE_REJECTED) {
      loss.set_records(losses_.rejected);
    }
  }
  v1::LossCounter* undelivered = batch->add_losses();
  undelivered->set_cause(v1::LOSS_CAUSE_EXIT_UNDELIVERED);
  undelivered->set_records(lost);
  spool->AppendLast(batch->seq(), last);  // if even this fails, the exit line alone says it
}

bool GrpcTransport::Flush(int64_t timeout_ms) {
  MutexLock lock(&mutex_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  while (!pending_.empty() && !stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    acked_.WaitFor(&mutex_, deadline - now);
  }
  return pending_.empty();
}

fs_transport_stats GrpcTransport::Stats() {
  MutexLock lock(&mutex_);
  fs_transport_stats stats = stats_;
  stats.bytes_pending = pending_.bytes();
  stats.records_pending = pending_.records();
  stats.records_spooled = pending_.spooled_records();
  stats.reconnects = welcomes_ > 0 ? welcomes_ - 1 : 0;
  return stats;
}

bool GrpcTransport::PollControl(fs_control* out) {
  MutexLock lock(&mutex_);
  if (controls_.empty()) return false;
  *out = controls_.front();
  controls_.pop_front();
  return true;
}

void GrpcTransport::ReplyControl(uint64_t id, bool accepted, std::string_view message) {
  v1::UpMessage reply;
  reply.mutable_control_reply()->set_id(id);
  reply.mutable_control_reply()->set_accepted(accepted);
  reply.mutable_control_reply()->set_message(std::string(message));
  MutexLock lock(&mutex_);
  if (replies_.size() >= kMaxQueuedReplies) replies_.pop_front();
  replies_.push_back(std::move(reply));
  writer_wake_.Signal();
}

void GrpcTransport::ConnectionLoop() {
  pthread_setname_np(pthread_self(), "flopscope-conn");  // recognisable in the job's tools
  uint32_t backoff_ms = initial_backoff_ms_;
  while (true) {
    {
      MutexLock lock(&mutex_);
      if (stopping_) {
        connection_done_ = true;
        stopped_.SignalAll();
        return;
      }
    }
    bool retry_at_once = false;
    if (RunStream(&retry_at_once)) backoff_ms = initial_backoff_ms_;
    if (retry_at_once) continue;
    SleepBackoff(backoff_ms);
    backoff_ms = std::min(max_backoff_ms_, backoff_ms * 2);
  }
}

bool GrpcTransport::RunStream(bool* retry_at_once) {
  if (!WaitForChannel()) return false;
  if (!orphans_checked_ && !spool_dir_.empty()) {
    // Hazard (dlmopen, see the members): one thread for the process's life, never recreated.
    orphans_checked_ = true;
    replay_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "flopscope-spool");
      ReplayOrphans();
    });
  }
  grpc::ClientContext context;
  if (!AttachContext(&context)) return false;
  auto stream = stub_->Stream(&context);
  bool welcomed = false;
  bool must_cancel = false;
  v1::DownMessage first;
  if (stream->Write(hello_) && stream->Read(&first)) {
    if (first.has_welcome()) {
      welcomed = true;
      ApplyWelcome(first.welcome());
      ServeStream(stream.get(), &context);
    } else {
      must_cancel = true;  // not the protocol we speak: end the call before Finish
    }
  }
  DetachContext();
  if (must_cancel) context.TryCancel();
  const grpc::Status status = stream->Finish();
  NoteRefusal(status, context);
  *retry_at_once = HandleRejection(status, context);
  return welcomed;
}

void GrpcTransport::NoteRefusal(const grpc::Status& status, const grpc::ClientContext& context) {
  if (status.ok()) return;
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kRefusalReasonKey);
  if (it == trailers.end()) return;
  MutexLock lock(&mutex_);
  const size_t n = std::min(it->second.size(), sizeof stats_.refusal - 1);
  std::memcpy(stats_.refusal, it->second.data(), n);
  stats_.refusal[n] = '\0';
}

void GrpcTransport::ReplayOrphans() {
  if (spool_dir_.empty()) return;
  SpoolFile::RemoveAbandonedCopies(spool_dir_);
  std::string own_path;
  {
    MutexLock lock(&mutex_);
    if (spool_ != nullptr) own_path = spool_->path();
  }
  for (const std::string& path : SpoolFile::List(spool_dir_)) {
    if (path == own_path) continue;
    std::string error;
    std::unique_ptr<SpoolFile> orphan = SpoolFile::OpenOrphan(path, &error);
    if (orphan == nullptr) continue;  // its process lives, or it is not ours to read
    if (ReplayOrphan(*orphan)) {
      orphan->Remove();
      MutexLock lock(&mutex_);
      ++stats_.orphans_replayed;
    }
    MutexLock lock(&mutex_);
    if (stopping_) return;
  }
}

bool GrpcTransport::ReplayOrphan(const SpoolFile& orphan) {
  grpc::ClientContext context;
  {
    MutexLock lock(&mutex_);
    if (stopping_) return false;
    replay_context_ = &context;
  }
  auto stream = stub_->Stream(&context);
  const std::vector<SpoolFile::Entry>& entries = orphan.entries();
  const uint64_t last = entries.empty() ? 0 : entries.back().seq;
  uint64_t committed = 0;
  bool welcomed = false;
  v1::DownMessage reply;
  // Reads one Ack (Controls are for live processes: ignored); false when the stream ended.
  auto read_ack = [&]() {
    while (stream->Read(&reply)) {
      if (!reply.has_ack()) continue;
      committed = std::max(committed, reply.ack().committed_seq());
      return true;
    }
    return false;
  };
  if (stream->Write(orphan.hello()) && stream->Read(&reply) && reply.has_welcome()) {
    welcomed = true;
    committed = reply.welcome().committed_seq();  // the daemon's dedup: nothing stored twice
    uint64_t in_flight = 0;
    v1::UpMessage batch;
    for (const SpoolFile::Entry& entry : entries) {
      if (entry.seq <= committed) continue;
      if (!orphan.Read(entry, &batch) || !stream->Write(batch)) break;
      if (++in_flight > kReplayWindow) {
        if (!read_ack()) break;
        --in_flight;
      }
    }
    stream->WritesDone();
    while (committed < last && read_ack()) {
    }
  }
  {
    MutexLock lock(&mutex_);
    replay_context_ = nullptr;
  }
  const bool complete = welcomed && committed >= last;
  if (!complete) context.TryCancel();
  const grpc::Status status = stream->Finish();
  // A batch the daemon refused is counted there (as rejected) and would be refused again.
  return complete || status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
}

bool GrpcTransport::WaitForChannel() {
  // Our loop's backoff decides when to try again; the long-lived channel's own backoff (which
  // may have grown while the daemon was away) must not delay an attempt further.
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
  // Give the connection one backoff step to come up instead of failing at once on a channel still
  // marked TRANSIENT_FAILURE from the previous attempt. (No deadline on the stream itself: it is
  // meant to live as long as the process.)
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(initial_backoff_ms_ * 2));
}

bool GrpcTransport::AttachContext(grpc::ClientContext* context) {
  MutexLock lock(&mutex_);
  if (stopping_) return false;
  active_context_ = context;
  return true;
}

void GrpcTransport::DetachContext() {
  MutexLock lock(&mutex_);
  active_context_ = nullptr;
  stats_.connected = 0;
}

void GrpcTransport::ApplyWelcome(const v1::Welcome& welcome) {
  {
    MutexLock lock(&mutex_);
    stats_.batches_acked += pending_.AckThrough(welcome.committed_seq());
    if (pending_.empty() && spool_ != nullptr) spool_->Reset();
    last_sent_seq_ = welcome.committed_seq();
    records_announced_ = 0;  // a new stream: the daemon's tally starts again
    stream_ended_ = false;
    stats_.connected = 1;
    ++welcomes_;
    const std::string& stored_as = welcome.stored_as_job_id();
    const size_t n = std::min(stored_as.size(), sizeof stats_.stored_as_job_id - 1);
    std::memcpy(stats_.stored_as_job_id, stored_as.data(), n);
    stats_.stored_as_job_id[n] = '\0';
  }
  acked_.SignalAll();
}

void GrpcTransport::ServeStream(Stream* stream, grpc::ClientContext* context) {
  std::thread reader([this, stream] {
    pthread_setname_np(pthread_self(), "flopscope-read");
    ReadLoop(stream);
  });
  WriteLoop(stream);
  CloseGracefully(stream, context);
  reader.join();
}

void GrpcTransport::CloseGracefully(Stream* stream, grpc::ClientContext* context) {
  // The writer stops on stop, on a failed write, or when the reader saw the end. Only in the
  // first case may the reader still be blocked in Read: half-close and give the daemon a moment
  // to end the stream, then cancel.
  {
    MutexLock lock(&mutex_);
    if (!stopping_ || stream_ended_) return;
  }
  stream->WritesDone();  // a network call: unlocked
  MutexLock lock(&mutex_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kGracefulCloseMs);
  if (!WaitUntilLocked(&writer_wake_, &stream_ended_, deadline)) context->TryCancel();
}

bool GrpcTransport::WriterHasWorkLocked() {
  return stopping_ || stream_ended_ || !replies_.empty() ||
         pending_.NextAfter(last_sent_seq_) != nullptr;
}

void GrpcTransport::WriteLoop(Stream* stream) {
  MutexLock lock(&mutex_);
  while (true) {
    while (!WriterHasWorkLocked()) writer_wake_.Wait(&mutex_);
    if (stopping_ || stream_ended_) return;
    if (!replies_.empty()) {
      v1::UpMessage reply = std::move(replies_.front());
      replies_.pop_front();
      mutex_.Unlock();
      const bool written = stream->Write(reply);  // a network call: unlocked
      mutex_.Lock();
      if (!written) return;
      continue;
    }
    const PendingBatch* next = pending_.NextAfter(last_sent_seq_);
    std::shared_ptr<const v1::UpMessage> message = next->message;
    const uint64_t seq = next->seq;
    if (message == nullptr) {
      // Spooled. Hazard: a disk read under mutex_ (one batch); the entry is valid while we hold
      // it: the file is cut back only once nothing is pending, and a compaction (under mutex_
      // too) moves the entries with the frames.
      auto loaded = std::make_shared<v1::UpMessage>();
      if (!spool_->Read(next->spooled, loaded.get())) return;  // the stream is retried later
      message = std::move(loaded);
    }
    const std::optional<v1::UpMessage> progress = ProgressBeforeLocked(seq);
    mutex_.Unlock();
    // Network calls: unlocked.
    const bool written = (!progress || stream->Write(*progress)) && stream->Write(*message);
    mutex_.Lock();
    if (!written) return;
    last_sent_seq_ = std::max(last_sent_seq_, seq);
  }
}

std::optional<v1::UpMessage> GrpcTransport::ProgressBeforeLocked(uint64_t seq) {
  // Only while batches queue up behind this one: a daemon that keeps up hears of every record
  // in the batches themselves, and a stream that ends then has nothing waiting to lose.
  if (pending_.NextAfter(seq) == nullptr || records_queued_ <= records_announced_) {
    return std::nullopt;
  }
  records_announced_ = records_queued_;
  v1::UpMessage progress;
  progress.mutable_progress()->set_records_queued(records_queued_);
  return progress;
}

void GrpcTransport::ReadLoop(grpc::ClientReaderWriter<v1::UpMessage, v1::DownMessage>* stream) {
  v1::DownMessage message;
  while (stream->Read(&message)) {
    MutexLock lock(&mutex_);
    if (message.has_ack()) {
      stats_.batches_acked += pending_.AckThrough(message.ack().committed_seq());
      if (pending_.empty() && spool_ != nullptr) spool_->Reset();
      stats_.refusal[0] = '\0';  // taking batches again
      acked_.SignalAll();
    } else if (message.has_control()) {
      if (controls_.size() >= kMaxQueuedControls) controls_.pop_front();
      controls_.push_back(ControlFrom(message.control()));
    }
  }
  MutexLock lock(&mutex_);
  stream_ended_ = true;
  writer_wake_.SignalAll();
}

bool GrpcTransport::HandleRejection(const grpc::Status& status,
                                    const grpc::ClientContext& context) {
  if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) return false;
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kRejectedSeqKey);
  if (it == trailers.end()) return false;
  const std::string text(it->second.data(), it->second.size());
  char* end = nullptr;
  const uint64_t seq = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') return false;
  MutexLock lock(&mutex_);
  const PendingBatch* rejected = pending_.Find(seq);
  if (rejected == nullptr) return false;
  ++stats_.batches_rejected;
  stats_.records_dropped += rejected->records;
  stats_.dropped_rejected += rejected->records;
  records_queued_ -= std::min(records_queued_, rejected->records);
  losses_.rejected += rejected->records;
  std::shared_ptr<const v1::UpMessage> original = rejected->message;
  if (original == nullptr) {  // spooled: read back for its definitions
    auto loaded = std::make_shared<v1::UpMessage>();
    if (spool_ != nullptr && spool_->Read(rejected->spooled, loaded.get())) original = loaded;
  }
  const v1::Batch& batch = original != nullptr ? original->batch() : v1::Batch::default_instance();
  if (!rejected->salvage && (batch.strings_size() > 0 || batch.paths_size() > 0)) {
    // Later batches may use the definitions this one carried. Resend them alone under the same
    // seq (a rejected seq was never committed); if that is rejected too, give up on it.
    auto salvage = std::make_shared<v1::UpMessage>(*original);
    v1::Batch* cut = salvage->mutable_batch();
    cut->clear_ranges();
    cut->clear_kernels();
    cut->clear_kernel_flops();
    cut->clear_windows();
    cut->clear_metadata();
    PendingBatch replacement;
    replacement.seq = seq;
    replacement.bytes = salvage->SpaceUsedLong();
    replacement.message = std::move(salvage);
    replacement.salvage = true;
    // Logged after the rejected frame: a reader keeps the later frame of a seq.
    LogLocked(*replacement.message, &replacement);
    pending_.Replace(std::move(replacement));
    last_sent_seq_ = std::min(last_sent_seq_, seq - 1);
  } else {
    pending_.Remove(seq);
  }
  acked_.SignalAll();
  return true;
}

void GrpcTransport::SleepBackoff(uint32_t ms) {
  MutexLock lock(&mutex_);
  WaitUntilLocked(&writer_wake_, &stopping_,
                  std::chrono::steady_clock::now() + std::chrono::milliseconds(ms));
}

bool GrpcTransport::WaitUntilLocked(CondVar* cv, const bool* flag,
                                    std::chrono::steady_clock::time_point deadline) {
  while (!*flag) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    cv->WaitFor(&mutex_, deadline - now);
  }
  return *flag;
}

}  // namespace flopscope::transport
