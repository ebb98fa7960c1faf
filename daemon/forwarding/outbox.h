#pragma once

// The node daemon's store-and-forward queue (flopscoped --upstream; docs/architecture.md,
// "Forwarding"): every batch committed here waits in <data_dir>/outbox.sqlite until the
// aggregator acknowledges its seq; per session the outbox keeps the watermark (the highest seq
// the aggregator has committed), the aggregator's resume token and the job's owner here. It
// survives restarts of either side: what is not acknowledged is sent again, and the aggregator's
// (session, seq) deduplication makes a resend harmless.
//
// A batch the full outbox drops stays on this node only; its records are counted once per seq
// (outbox_dropped) and a small stub takes its place (the seq of the latest drop, its final flag
// and loss counters, no records; one per session, merged on every drop, outside the bound).
// Every batch Pending hands out carries the session's dropped records as a cumulative
// LossCounter of LOSS_CAUSE_FORWARD_DROPPED, so the aggregator counts them by cause for that
// rank, learns of a final batch that was dropped, and keeps the maximum over resends.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/sqlite/sqlite_db.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon::forwarding {

// A GiB of batches waiting: hours of a node's ranks behind an unreachable aggregator.
inline constexpr int64_t kDefaultOutboxMaxBytes = int64_t{1} << 30;

// <data_dir>/outbox.sqlite.
std::string OutboxPath(absl::string_view data_dir);

// A session with batches waiting, as the forwarder needs it to open its stream upstream.
struct OutboxSession {
  int64_t id = 0;
  v1::SessionHello hello;      // without the producer's resume token
  uint32_t owner_uid = 0;      // the job's owner on this node
  std::string upstream_token;  // its resume token upstream, drawn here with the session row
  uint64_t acked_seq = 0;      // watermark
};

struct OutboxTotals {
  int64_t pending_batches = 0;
  int64_t pending_bytes = 0;
  int64_t dropped_batches = 0;  // never forwarded (full, or refused upstream), every session
  int64_t dropped_records = 0;  // of those the full outbox dropped (counted upstream as lost)
  // When the oldest batch waiting was put here (unix ns); 0 when nothing waits.
  int64_t oldest_put_ns = 0;
};

// Thread-safe: the Collector's streams put, the forwarder takes and acknowledges.
class Outbox {
 public:
  // Opens (creating) `path`; `max_bytes` bounds the batches waiting.
  static absl::StatusOr<std::unique_ptr<Outbox>> Open(const std::string& path, int64_t max_bytes);

  // The job's owner on this node, asked only when a session is new to the outbox.
  using OwnerLookup = std::function<absl::StatusOr<uint32_t>()>;
  // Keeps `batch` (committed here) of `hello`'s session until it is acknowledged upstream. A seq
  // at or below the watermark, already waiting or dropped before, is left alone (a producer's
  // resend). When the outbox is full the batch is dropped: counted, its stub kept, and
  // RESOURCE_EXHAUSTED says so.
  absl::Status Put(const v1::SessionHello& hello, const v1::Batch& batch, const OwnerLookup& owner)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sessions with batches waiting, oldest first.
  absl::StatusOr<std::vector<OutboxSession>> SessionsWithWork() ABSL_LOCKS_EXCLUDED(mu_);
  // The session of (job, rank, session id) as the outbox knows it, waiting batches or not;
  // nullopt when it never had a batch here.
  absl::StatusOr<std::optional<OutboxSession>> Find(absl::string_view job_id, int32_t rank,
                                                    absl::string_view session_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `max_batches` waiting batches of `session` above `after_seq`, in seq order, each with
  // the session's dropped records as its LOSS_CAUSE_FORWARD_DROPPED counter (added to one the
  // batch carries from a daemon below, when this node is itself an aggregator that forwards).
  absl::StatusOr<std::vector<v1::Batch>> Pending(int64_t session, uint64_t after_seq,
                                                 size_t max_batches) ABSL_LOCKS_EXCLUDED(mu_);
  // The aggregator has committed every seq <= `committed_seq`: the watermark moves up (never
  // down) and those batches leave the outbox.
  absl::Status Acknowledge(int64_t session, uint64_t committed_seq) ABSL_LOCKS_EXCLUDED(mu_);
  // The aggregator refused batch `seq` for good (INVALID_ARGUMENT): removed and counted.
  absl::Status DropRefused(int64_t session, uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<OutboxTotals> Totals() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Outbox(std::unique_ptr<SqliteDb> db, int64_t max_bytes)
      : db_(std::move(db)), max_bytes_(max_bytes) {}
  absl::Status Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session's row id, the row created on first sight.
  absl::StatusOr<int64_t> SessionFor(const v1::SessionHello& hello, const OwnerLookup& owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CountDropped(int64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `seq` of `session` waits here, or was dropped here before.
  absl::StatusOr<bool> Holds(SqliteStatement& query, int64_t session, uint64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The full outbox drops `batch`: its records counted once, its stub merged into the session's.
  // The caller returns RESOURCE_EXHAUSTED.
  absl::Status Drop(int64_t session, const v1::Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces the session's stub by one for `batch` merged with it; `bytes_delta` what that adds.
  absl::Status KeepStub(int64_t session, const v1::Batch& batch, int64_t* bytes_delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> DroppedRecords(int64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  const int64_t max_bytes_;
  int64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<SqliteStatement> find_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> find_full_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> insert_session_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> insert_batch_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> acked_bytes_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> delete_acked_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> raise_watermark_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> delete_batch_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> count_dropped_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> is_waiting_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> was_dropped_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> insert_dropped_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> dropped_records_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> stub_seq_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> take_batch_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SqliteStatement> set_stub_seq_ ABSL_GUARDED_BY(mu_);
  // Session row ids by "job\0rank\0session" and their watermarks, so that a batch costs no
  // lookup query.
  absl::flat_hash_map<std::string, int64_t> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, uint64_t> watermarks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace flopscope::daemon::forwarding
