#pragma once

// The one ingest path (docs/design/daemon.md, "Ingest"): how a session's batches reach the
// store, the catalog, the metrics and the forwarder, whichever way they came. A live producer's
// Collector stream (collector_service.h) and an orphaned spool file that the spool collector
// delivers (spool_collector.h) differ only in how they read batches and who vouches for the
// writer; from the hello on, both go through here, so what one route stores the other stores
// the same way (ingest_routes_unittest.cc feeds one job through both and compares the files).
//
// For each session: Open (after the caller validated the hello and checked the writer's right
// to the job), then Commit per batch, then End once. Each step does, in this order:
//   Open:   the disk reserve; the rank's store and the session in it; the catalog's listing;
//           the connected hook (the query side opens its reader).
//   Commit: the disk reserve for this batch; the store's commit (validation, one transaction);
//           a rejection counted in the catalog and the metrics, by rule; for a new batch, the
//           tally, the announced parallel layout and the rank's totals in the catalog, and the
//           metrics; then, new or duplicate, the committed hook (the forwarder's outbox).
//   End:    the session's end in the store (its losses), the totals again, the catalog's
//           listing.
//
// Thread-safe: sessions of any ranks may be ingested at once (the stores and the catalog are
// thread-safe; totals_mu_ orders the totals of one rank's parallel sessions).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/catalog/catalog.h"
#include "daemon/metrics/metrics_registry.h"
#include "daemon/store/rank_store.h"
#include "daemon/store/store_registry.h"
#include "flopscope/v1/collector.pb.h"

namespace flopscope::daemon {

class IngestPath {
 public:
  IngestPath(StoreRegistry* stores, Catalog* catalog);

  // Told of every session opened, once its store holds it (the query side opens its reader while
  // the writer holds the file). Set before ingesting; may stay null.
  using ConnectedHook = std::function<void(const std::string& job_id, int32_t rank)>;
  void SetConnectedHook(ConnectedHook hook) { connected_hook_ = std::move(hook); }
  // Told of every committed batch and rejection (`flopscoped --metrics`). Set before ingesting;
  // may stay null.
  void SetMetrics(metrics::MetricsRegistry* metrics) { metrics_ = metrics; }
  // Told of every batch that is committed (or was already) before its Ack goes back:
  // `flopscoped --upstream` keeps it for the aggregator (daemon/forwarding/outbox.h). Set before
  // ingesting; may stay null.
  using CommittedHook = std::function<void(const v1::SessionHello& hello, const v1::Batch& batch)>;
  void SetCommittedHook(CommittedHook hook) { committed_hook_ = std::move(hook); }
  // Asked before a session opens and before each batch, after the disk reserve: a non-OK status
  // refuses it as a full disk does (`flopscoped --max-disk`, `--max-disk-per-user`: the owner's
  // share or quota, JobPruner::CheckWriter; RESOURCE_EXHAUSTED). Set before ingesting; may stay
  // null.
  using AdmitHook = std::function<absl::Status(const v1::SessionHello& hello)>;
  void SetAdmitHook(AdmitHook hook) { admit_hook_ = std::move(hook); }

  // The disk reserve (StoreRegistry::CheckSpace), for a route that checks it before work of its
  // own; Open and Commit check it again.
  absl::Status CheckSpace() const { return stores_->CheckSpace(); }

  // A session open for ingest. `hello` must outlive it.
  struct Session {
    const v1::SessionHello* hello = nullptr;
    std::shared_ptr<RankStore> store;  // held for the session's life, shared with its rank's
    int64_t sid = 0;
    uint64_t committed_seq = 0;  // the highest seq the store holds: a resend below is a duplicate
    // A node daemon's forwarded stream (its batches may carry LOSS_CAUSE_FORWARD_DROPPED), or a
    // producer's stream or spool file.
    BatchOrigin origin = BatchOrigin::kProducer;
  };

  // Opens `hello`'s session, validated and allowed by the caller. `origin`: kNodeDaemon only for
  // a stream the caller knows a node daemon forwards (its writer was vouched for as one). A full
  // disk is IsDiskFull(status); any other failure is logged and returned as it came.
  absl::StatusOr<Session> Open(const v1::SessionHello& hello,
                               BatchOrigin origin = BatchOrigin::kProducer);

  // Commits one batch of `session`, adding a new one's records to `tally`. INVALID_ARGUMENT: the
  // batch was rejected (logged, counted; nothing of it stored); a full disk is
  // IsDiskFull(status); any other error: nothing was stored, the batch may come again.
  absl::StatusOr<CommitOutcome> Commit(const Session& session, const v1::Batch& batch,
                                       StreamTally* tally);

  // Ends `session`: the store records its end with `tally` (what the producer announced or made
  // and what arrived, so the difference counts as lost) and the catalog lists it as ended. The
  // store's status: the catalog's failures are logged, never returned (listings are a
  // convenience).
  absl::Status End(const Session& session, const StreamTally& tally);

 private:
  // The rank's totals as its store has them now, into the catalog. The snapshot and the write
  // are one step under totals_mu_: two sessions of one rank (a node forwards each session on its
  // own stream, in parallel) would otherwise let an older snapshot be written last.
  void PublishTotals(const Session& session) ABSL_LOCKS_EXCLUDED(totals_mu_);
  // A `parallel` mark in the batch becomes the rank's layout in the catalog.
  void RecordAnnouncedLayout(const Session& session, const v1::Batch& batch);
  // Counts a rejected batch where it is dropped (the producer cannot count it), by rule.
  void CountRejection(const Session& session, const v1::Batch& batch, const absl::Status& why);

  StoreRegistry* const stores_;
  Catalog* const catalog_;
  ConnectedHook connected_hook_;
  CommittedHook committed_hook_;
  AdmitHook admit_hook_;
  metrics::MetricsRegistry* metrics_ = nullptr;
  absl::Mutex totals_mu_;  // see PublishTotals
};

// "job J rank R session S": how the log names a session.
std::string DescribeSession(const v1::SessionHello& hello);

}  // namespace flopscope::daemon
