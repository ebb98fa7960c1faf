// The one ingest path of a session's batches (ingest_path.h).
#include "daemon/ingest/ingest_path.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/base/logger.h"
#include "daemon/store/disk_space.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/parallel_mark.h"

namespace flopscope::daemon {

std::string DescribeSession(const v1::SessionHello& hello) {
  return absl::StrCat("job ", hello.job_id(), " rank ", hello.rank(), " session ",
                      hello.session_id());
}

IngestPath::IngestPath(StoreRegistry* stores, Catalog* catalog)
    : stores_(stores), catalog_(catalog) {}

absl::StatusOr<IngestPath::Session> IngestPath::Open(const v1::SessionHello& hello,
                                                     BatchOrigin origin) {
  if (absl::Status s = stores_->CheckSpace(); !s.ok()) return s;
  if (admit_hook_) {
    if (absl::Status s = admit_hook_(hello); !s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<RankStore>> store = stores_->Acquire(hello.job_id(), hello.rank());
  absl::StatusOr<SessionHandle> opened =
      store.ok() ? (*store)->OpenSession(hello) : absl::StatusOr<SessionHandle>(store.status());
  if (!opened.ok()) {
    LogError("cannot store ", DescribeSession(hello), ": ", opened.status().message());
    return opened.status();
  }
  // Listings are a convenience: a catalog failure is logged, never fatal to the data.
  const absl::Status listed = catalog_->SessionConnected(hello, absl::GetCurrentTimeNanos());
  if (!listed.ok()) LogWarning("catalog: ", listed.message());
  if (connected_hook_) connected_hook_(hello.job_id(), hello.rank());
  return Session{&hello, *std::move(store), opened->sid, opened->committed_seq, origin};
}

absl::StatusOr<CommitOutcome> IngestPath::Commit(const Session& session, const v1::Batch& batch,
                                                 StreamTally* tally) {
  CommitOutcome outcome;
  absl::Status status = stores_->CheckSpace(DiskSpaceGuard::CommitBytesFor(batch.ByteSizeLong()));
  if (status.ok() && admit_hook_) status = admit_hook_(*session.hello);
  if (status.ok()) status = session.store->Commit(session.sid, batch, &outcome, session.origin);
  if (absl::IsInvalidArgument(status)) {
    CountRejection(session, batch, status);
    return status;
  }
  if (!status.ok()) return status;
  if (!outcome.duplicate) {
    tally->received += ProducerRecordCount(batch);
    RecordAnnouncedLayout(session, batch);
    PublishTotals(session);
    if (metrics_ != nullptr) metrics_->OnCommitted(*session.hello, batch, session.store->Totals());
  }
  if (committed_hook_) committed_hook_(*session.hello, batch);
  return outcome;
}

absl::Status IngestPath::End(const Session& session, const StreamTally& tally) {
  const v1::SessionHello& hello = *session.hello;
  const absl::Status ended = session.store->EndStream(session.sid, tally);
  if (!ended.ok())
    LogWarning("end of ", DescribeSession(hello), " not recorded: ", ended.message());
  // The totals again: an update refused after some commit (disk full) is caught up here.
  PublishTotals(session);
  const absl::Status listed =
      catalog_->SessionDisconnected(hello.job_id(), hello.rank(), absl::GetCurrentTimeNanos());
  if (!listed.ok()) LogWarning("catalog: ", listed.message());
  return ended;
}

void IngestPath::PublishTotals(const Session& session) {
  absl::MutexLock lock(&totals_mu_);
  const absl::Status s =
      catalog_->UpdateTotals(session.hello->job_id(), session.hello->rank(),
                             session.store->Totals(), absl::GetCurrentTimeNanos());
  if (!s.ok()) LogWarning("catalog: ", s.message());
}

void IngestPath::RecordAnnouncedLayout(const Session& session, const v1::Batch& batch) {
  // The latest mark of the batch wins, as it would have had it arrived in a later batch.
  for (auto it = batch.metadata().rbegin(); it != batch.metadata().rend(); ++it) {
    if (it->key() != kParallelKey) continue;
    absl::StatusOr<v1::ParallelLayout> layout = ParseParallelMark(it->value());
    if (!layout.ok()) {
      // The mark is stored as metadata either way; only the layout stays as the hello said.
      LogWarning(DescribeSession(*session.hello), ": ", layout.status().message());
      return;
    }
    const absl::Status set =
        catalog_->SetAnnouncedLayout(session.hello->job_id(), session.hello->rank(), *layout);
    if (!set.ok()) LogWarning("catalog: ", set.message());
    return;
  }
}

void IngestPath::CountRejection(const Session& session, const v1::Batch& batch,
                                const absl::Status& why) {
  const v1::SessionHello& hello = *session.hello;
  LogWarning("rejected ", DescribeSession(hello), ": ", why.message());
  const std::string rule = RejectedRule(why);
  const absl::Status counted = catalog_->AddRejection(
      hello.job_id(), hello.rank(), hello.session_id(), rule, BatchRecordCount(batch));
  if (!counted.ok()) LogWarning("catalog: ", counted.message());
  if (metrics_ != nullptr) metrics_->OnRejected(hello, rule, BatchRecordCount(batch));
}

}  // namespace flopscope::daemon
