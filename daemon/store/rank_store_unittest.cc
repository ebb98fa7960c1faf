#include "daemon/store/rank_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_queries.h"
#include "daemon/testing/test_temp_dir.h"
#include "daemon/validate/batch_validator.h"

namespace flopscope::daemon {
namespace {

using fixtures::AddKernel;
using fixtures::AddLoss;
using fixtures::AddMetadata;
using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::AddString;
using ::testing::HasSubstr;

class RankStoreTest : public ::testing::Test {
 protected:
  RankStoreTest() : path_(dir_.File("rank-00000.sqlite")) {}

  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  int64_t OpenSession(const std::string& session_id = "node-1-100-1") {
    absl::StatusOr<SessionHandle> session =
        store_->OpenSession(fixtures::Hello("job-1", 0, session_id));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? session->sid : -1;
  }

  // A batch defining the model tree and a kernel name, with one range and two kernels.
  static v1::Batch FirstBatch(uint64_t seq = 1) {
    v1::Batch batch;
    batch.set_seq(seq);
    AddString(batch, 1, "ampere_sgemm_128x64_nn");
    AddPath(batch, 1, 0, "model");
    AddPath(batch, 2, 1, "encoder");
    AddRange(batch, 2, 0, 1000);
    AddKernel(batch, 2, 1, 100, 300);
    AddKernel(batch, 2, 1, 500, 200);
    return batch;
  }

  // One number from a query on a second connection, as another reader would see it.
  int64_t Query(const std::string& sql) {
    return static_cast<int64_t>(fixtures::QueryNumber(path_, sql));
  }

  fixtures::ScopedTempDir dir_;
  std::string path_;
  std::unique_ptr<RankStore> store_;
};

TEST_F(RankStoreTest, UsesWalModeAndTheCurrentSchemaVersion) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path_);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<std::unique_ptr<SqliteStatement>> mode = (*db)->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok());
  ASSERT_TRUE(*(*mode)->Step());
  EXPECT_EQ((*mode)->ColumnText(0), "wal");
  (*mode)->Reset();
  EXPECT_EQ(Query("SELECT MAX(version) FROM schema_version"), kSchemaVersion);
  EXPECT_EQ(kSchemaVersion, 5);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM schema_version"), 1);
}

TEST_F(RankStoreTest, CommitsEveryRecordAndTheRollup) {
  const int64_t sid = OpenSession();
  v1::Batch batch = FirstBatch();
  AddMetadata(batch, "batch_size", "32");
  AddLoss(batch, v1::LOSS_CAUSE_BUFFER_FULL, 4);
  CommitOutcome outcome;
  ASSERT_TRUE(store_->Commit(sid, batch, &outcome).ok());
  EXPECT_EQ(outcome.committed_seq, 1u);
  EXPECT_FALSE(outcome.duplicate);

  EXPECT_EQ(Query("SELECT COUNT(*) FROM strings"), 1);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_paths"), 2);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_events"), 1);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernels"), 2);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM metadata"), 1);
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 1"), 4);
  EXPECT_EQ(Query("SELECT last_seq FROM sessions"), 1);
  EXPECT_EQ(Query("SELECT kernels FROM sessions"), 2);
  EXPECT_EQ(Query("SELECT calls FROM module_stats WHERE path_id = 2"), 1);
  EXPECT_EQ(Query("SELECT cpu_time_ns FROM module_stats WHERE path_id = 2"), 1000);
  EXPECT_EQ(Query("SELECT kernels FROM module_stats WHERE path_id = 2"), 2);
  EXPECT_EQ(Query("SELECT gpu_time_ns FROM module_stats WHERE path_id = 2"), 500);
  EXPECT_EQ(Query("SELECT flops IS NULL FROM module_stats WHERE path_id = 2"), 1);

  const RankTotals totals = store_->Totals();
  EXPECT_EQ(totals.sessions, 1u);
  EXPECT_EQ(totals.kernels, 2u);
  EXPECT_EQ(totals.range_events, 1u);
  EXPECT_EQ(totals.losses.at(v1::LOSS_CAUSE_BUFFER_FULL), 4u);
}

TEST_F(RankStoreTest, RollupAccumulatesAcrossBatches) {
  const int64_t sid = OpenSession();
  ASSERT_TRUE(store_->Commit(sid, FirstBatch()).ok());
  v1::Batch second;
  second.set_seq(2);
  AddRange(second, 2, 2000, 400);
  AddRange(second, 2, 3000, 1600);
  AddKernel(second, 2, 1, 2100, 50);
  v1::FlopCounters* counted = fixtures::AddKernelFlops(second, 2, 1, 0)->mutable_flops();
  counted->set_fp32(1000);
  counted->add_tensor()->set_flops(24);
  counted->mutable_tensor(0)->set_source("fp16");
  ASSERT_TRUE(store_->Commit(sid, second).ok());

  EXPECT_EQ(Query("SELECT calls FROM module_stats WHERE path_id = 2"), 3);
  EXPECT_EQ(Query("SELECT cpu_time_ns FROM module_stats WHERE path_id = 2"), 3000);
  EXPECT_EQ(Query("SELECT min_ns FROM module_stats WHERE path_id = 2"), 400);
  EXPECT_EQ(Query("SELECT max_ns FROM module_stats WHERE path_id = 2"), 1600);
  EXPECT_EQ(Query("SELECT kernels FROM module_stats WHERE path_id = 2"), 3);
  EXPECT_EQ(Query("SELECT gpu_time_ns FROM module_stats WHERE path_id = 2"), 550);
  EXPECT_EQ(Query("SELECT flops FROM module_stats WHERE path_id = 2"), 1024);
  EXPECT_EQ(Query("SELECT counted_kernels FROM module_stats WHERE path_id = 2"), 1);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernel_flops WHERE tensor = '{\"fp16\":24}'"), 1);
}

TEST_F(RankStoreTest, DuplicatesAreAcknowledgedButNotWritten) {
  const int64_t sid = OpenSession();
  ASSERT_TRUE(store_->Commit(sid, FirstBatch(1)).ok());
  v1::Batch third;
  third.set_seq(3);  // a gap: batch 2 was dropped by the injector
  AddKernel(third, 0, 1, 0, 10);
  ASSERT_TRUE(store_->Commit(sid, third).ok());

  for (uint64_t seq : {1u, 2u, 3u}) {
    CommitOutcome outcome;
    ASSERT_TRUE(store_->Commit(sid, FirstBatch(seq), &outcome).ok());
    EXPECT_TRUE(outcome.duplicate) << seq;
    EXPECT_EQ(outcome.committed_seq, 3u);
  }
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernels"), 3);
  EXPECT_EQ(Query("SELECT last_seq FROM sessions"), 3);
}

TEST_F(RankStoreTest, InvalidBatchStoresNothing) {
  const int64_t sid = OpenSession();
  v1::Batch batch = FirstBatch();
  AddKernel(batch, 99, 1, 0, 10);
  absl::Status status = store_->Commit(sid, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch seq 1: kernels[2]: path_id 99 is not defined"));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernels"), 0);
  EXPECT_EQ(Query("SELECT last_seq FROM sessions"), 0);
}

TEST_F(RankStoreTest, StorageFailureRollsTheWholeBatchBack) {
  const int64_t sid = OpenSession();
  {
    // Inject a failure in the middle of the transaction, after kernels were inserted.
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("CREATE TRIGGER boom BEFORE INSERT ON metadata WHEN NEW.key = 'boom' "
                           "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;")
                    .ok());
  }
  v1::Batch batch = FirstBatch();
  AddMetadata(batch, "boom", "1");
  AddLoss(batch, v1::LOSS_CAUSE_BUFFER_FULL, 4);
  absl::Status status = store_->Commit(sid, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(status.message(), HasSubstr("injected failure"));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernels"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_paths"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM module_stats"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses"), 0);
  EXPECT_EQ(Query("SELECT last_seq FROM sessions"), 0);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_instance_ids"), 0);
  EXPECT_EQ(store_->Totals().kernels, 0u);

  // Memory did not keep the failed batch's definitions: using them alone is still invalid...
  v1::Batch uses_path;
  uses_path.set_seq(1);
  AddKernel(uses_path, 2, 1, 0, 10);
  EXPECT_EQ(store_->Commit(sid, uses_path).code(), absl::StatusCode::kInvalidArgument);
  // ...and the same batch, its range instance ids included, goes through once the fault is gone.
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("DROP TRIGGER boom").ok());
  }
  ASSERT_TRUE(store_->Commit(sid, batch).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM kernels"), 2);
  EXPECT_EQ(Query("SELECT last_seq FROM sessions"), 1);
}

TEST_F(RankStoreTest, ReconnectAfterReopenResumesTheSession) {
  const int64_t sid = OpenSession("node-1-100-1");
  ASSERT_TRUE(store_->Commit(sid, FirstBatch()).ok());
  Reopen();

  absl::StatusOr<SessionHandle> again =
      store_->OpenSession(fixtures::Hello("job-1", 0, "node-1-100-1"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sid, sid);
  EXPECT_EQ(again->committed_seq, 1u);
  EXPECT_EQ(store_->Totals().kernels, 2u);

  // Definitions came back from the file: references work, conflicting redefinitions do not.
  v1::Batch uses_path;
  uses_path.set_seq(2);
  AddKernel(uses_path, 2, 1, 0, 10);
  EXPECT_TRUE(store_->Commit(sid, uses_path).ok());
  v1::Batch redefines;
  redefines.set_seq(3);
  AddPath(redefines, 2, 1, "decoder");
  EXPECT_EQ(store_->Commit(sid, redefines).code(), absl::StatusCode::kInvalidArgument);
}

// The campaign's 26-year range, and one a little older than its session: refused, and still
// refused after a restart by the start the session's first hello gave (a resuming hello's
// start is not taken).
TEST_F(RankStoreTest, RangesOlderThanTheirSessionAreRefusedAlsoAfterAReopen) {
  const int64_t sid = OpenSession("node-1-100-1");
  v1::Batch batch = FirstBatch();
  batch.mutable_ranges(0)->set_start_ns(kEarliestTimestampNs + 1);
  batch.mutable_ranges(0)->set_end_ns(absl::ToUnixNanos(absl::Now() + absl::Hours(23)));
  absl::Status status = store_->Commit(sid, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("session's start_time_ns ", fixtures::BaseNs())));

  Reopen();
  v1::SessionHello resumed = fixtures::Hello("job-1", 0, "node-1-100-1");
  resumed.set_start_time_ns(0);
  ASSERT_TRUE(store_->OpenSession(resumed).ok());
  batch.mutable_ranges(0)->set_start_ns(fixtures::BaseNs() - kSessionStartSlackNs - 1);
  batch.mutable_ranges(0)->set_end_ns(fixtures::BaseNs());
  status = store_->Commit(sid, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ranges[0]: start_ns"));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_events"), 0);

  batch.mutable_ranges(0)->set_start_ns(fixtures::BaseNs() - kSessionStartSlackNs);
  EXPECT_TRUE(store_->Commit(sid, batch).ok()) << "within the clock slack";
}

TEST_F(RankStoreTest, AnOccurrenceStoredByAnEarlierBatchIsRefusedAlsoAfterAReopen) {
  // Campaign row 3a: a later batch (a new seq, so not a resend) repeating an instance id was
  // stored again and counted as a second call.
  const int64_t sid = OpenSession("node-1-100-1");
  v1::Batch first = FirstBatch(1);
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  const uint64_t stored_id = first.ranges(0).instance_id();

  v1::Batch again;
  again.set_seq(2);
  AddRange(again, 2, 2000, 100);  // a new occurrence, then the stored one
  AddRange(again, 2, 3000, 100)->set_instance_id(stored_id);
  absl::Status status = store_->Commit(sid, again);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("ranges[1]: instance_id ", stored_id,
                                     " was stored by an earlier batch of this session")));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_events"), 1);  // nothing of the refused batch

  // The resend of the first batch (its own seq) is still a duplicate, acknowledged unwritten.
  CommitOutcome outcome;
  ASSERT_TRUE(store_->Commit(sid, first, &outcome).ok());
  EXPECT_TRUE(outcome.duplicate);

  Reopen();  // a restarted daemon: the ids come from the file
  ASSERT_TRUE(store_->OpenSession(fixtures::Hello("job-1", 0, "node-1-100-1")).ok());
  again.set_seq(3);
  status = store_->Commit(sid, again);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  again.mutable_ranges(1)->set_instance_id(stored_id + 1000);
  EXPECT_TRUE(store_->Commit(sid, again).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM range_events"), 3);

  // Another session may use the same ids (each process numbers its own).
  const int64_t other = OpenSession("node-1-200-1");
  v1::Batch other_batch = FirstBatch(1);
  other_batch.mutable_ranges(0)->set_instance_id(stored_id);
  EXPECT_TRUE(store_->Commit(other, other_batch).ok());
}

TEST_F(RankStoreTest, SessionsAreSeparateAndLossesKeepTheMaximum) {
  const int64_t first = OpenSession("a");
  const int64_t second = OpenSession("b");
  ASSERT_NE(first, second);
  v1::Batch batch;
  batch.set_seq(1);
  AddLoss(batch, v1::LOSS_CAUSE_CUPTI_DROPPED, 10);
  ASSERT_TRUE(store_->Commit(first, batch).ok());
  batch.set_seq(2);
  batch.mutable_losses(0)->set_records(7);  // cumulative counts never go down: keep 10
  ASSERT_TRUE(store_->Commit(first, batch).ok());
  batch.set_seq(1);
  ASSERT_TRUE(store_->Commit(second, batch).ok());

  EXPECT_EQ(Query("SELECT records FROM losses WHERE sid = " + std::to_string(first)), 10);
  const RankTotals totals = store_->Totals();
  EXPECT_EQ(totals.sessions, 2u);
  EXPECT_EQ(totals.losses.at(v1::LOSS_CAUSE_CUPTI_DROPPED), 17u);
}

TEST_F(RankStoreTest, AStreamEndingWithoutItsFinalBatchIsFlaggedAndCounted) {
  const int64_t sid = OpenSession();
  v1::Batch first = FirstBatch();  // 1 range + 2 kernels: 3 records
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  // The producer announced 10 queued records; 3 arrived.
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{10, ProducerRecordCount(first)}).ok());
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 11"), 7);
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 12"), 1);
  EXPECT_EQ(store_->Totals().losses.at(v1::LOSS_CAUSE_NOT_ARRIVED), 7u);
  EXPECT_EQ(store_->Totals().losses.at(v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL), 1u);

  // Resumed: no longer ended. Its spool brings 2 ranges, announcing nothing: 5 still missing.
  ASSERT_EQ(OpenSession(), sid);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses WHERE cause = 12"), 0);
  v1::Batch second;
  second.set_seq(2);
  AddRange(second, 2, 2000, 3000);
  AddRange(second, 2, 4000, 5000);
  ASSERT_TRUE(store_->Commit(sid, second).ok());
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{0, ProducerRecordCount(second)}).ok());
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 11"), 5);
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 12"), 1);

  // The final batch arrives: nothing is missing any more.
  ASSERT_EQ(OpenSession(), sid);
  v1::Batch last;
  last.set_seq(3);
  last.set_final(true);
  ASSERT_TRUE(store_->Commit(sid, last).ok());
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{}).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses WHERE cause IN (11, 12)"), 0);
  EXPECT_EQ(store_->Totals().losses.count(v1::LOSS_CAUSE_NOT_ARRIVED), 0u);
}

TEST_F(RankStoreTest, RecordsMadeButNeitherStoredNorCountedAreCountedAsKilled) {
  const int64_t sid = OpenSession();
  v1::Batch first = FirstBatch();  // 3 records
  AddLoss(first, v1::LOSS_CAUSE_DAEMON_UNREACHABLE, 4);
  AddLoss(first, v1::LOSS_CAUSE_BUFFER_FULL, 100);  // never made: not taken off
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  const uint64_t stored = ProducerRecordCount(first);
  constexpr uint64_t kMade = 50, kAnnounced = 10;
  StreamTally tally{kAnnounced, stored};
  tally.made_known = true;
  tally.made = kMade;
  ASSERT_TRUE(store_->EndStream(sid, tally).ok());
  const uint64_t not_arrived = kAnnounced - stored;
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 13"),
            static_cast<int64_t>(kMade - stored - 4 - not_arrived));
  EXPECT_EQ(store_->Totals().losses.at(v1::LOSS_CAUSE_KILLED), kMade - stored - 4 - not_arrived);

  // A later stream that does not know what was made leaves the figure; a final batch clears it.
  ASSERT_EQ(OpenSession(), sid);
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{}).ok());
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 13"),
            static_cast<int64_t>(kMade - stored - 4 - not_arrived));
  ASSERT_EQ(OpenSession(), sid);
  v1::Batch last;
  last.set_seq(2);
  last.set_final(true);
  ASSERT_TRUE(store_->Commit(sid, last).ok());
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{}).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses WHERE cause = 13"), 0);
}

// A made-counts file that names the signal a drain began for (SIGINT, SIGTERM), with no final
// batch stored: the session gets one row naming it, the daemon's, which is never counted as a
// record the process made (what is killed stays made - stored), is written once however often
// the session ends, and goes when a final batch comes after all.
TEST_F(RankStoreTest, ACutShortDrainsSignalIsNamedOnceAndNeverCountedAsARecord) {
  const int64_t sid = OpenSession();
  v1::Batch first = FirstBatch();
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  const uint64_t stored = ProducerRecordCount(first);
  constexpr uint64_t kMade = 20;
  StreamTally tally{0, stored};
  tally.made_known = true;
  tally.made = kMade;
  tally.end_signal = SIGTERM;
  const std::string named =
      "SELECT COUNT(*) FROM metadata WHERE key = 'process.end_signal_cut_short' AND "
      "value = 'SIGTERM'";
  for (int end = 0; end < 2; ++end) {
    ASSERT_TRUE(store_->EndStream(sid, tally).ok());
    EXPECT_EQ(Query(named), 1);
    EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 13"),
              static_cast<int64_t>(kMade - stored));
    ASSERT_EQ(OpenSession(), sid);
  }
  // A stream that knows nothing of the file leaves the row; a final batch takes it away.
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{}).ok());
  EXPECT_EQ(Query(named), 1);
  ASSERT_EQ(OpenSession(), sid);
  v1::Batch last;
  last.set_seq(2);
  last.set_final(true);
  ASSERT_TRUE(store_->Commit(sid, last).ok());
  ASSERT_TRUE(store_->EndStream(sid, tally).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM metadata WHERE key = 'process.end_signal_cut_short'"), 0);

  // Without a signal in the file (a SIGKILL), no row at all.
  const int64_t killed = OpenSession("node-1-200-1");
  StreamTally no_signal;
  no_signal.made_known = true;
  no_signal.made = 5;
  ASSERT_TRUE(store_->EndStream(killed, no_signal).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM metadata WHERE key = 'process.end_signal_cut_short'"), 0);
}

TEST_F(RankStoreTest, MoreAccountedForThanMadeCountsNoneKilled) {
  const int64_t sid = OpenSession();
  v1::Batch first = FirstBatch();
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  StreamTally tally{0, ProducerRecordCount(first)};
  tally.made_known = true;
  tally.made = 1;  // fewer than stored: a damaged count, never a negative loss
  ASSERT_TRUE(store_->EndStream(sid, tally).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses WHERE cause = 13"), 0);
}

TEST_F(RankStoreTest, AnnouncedRecordsThatAllArrivedAreNoLoss) {
  const int64_t sid = OpenSession();
  v1::Batch first = FirstBatch();
  ASSERT_TRUE(store_->Commit(sid, first).ok());
  ASSERT_TRUE(store_->EndStream(sid, StreamTally{3, 3}).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM losses WHERE cause = 11"), 0);
  EXPECT_EQ(Query("SELECT records FROM losses WHERE cause = 12"), 1);  // still no final batch
}

TEST_F(RankStoreTest, Uint64IdsRoundTrip) {
  const int64_t sid = OpenSession();
  v1::Batch batch = FirstBatch();
  batch.mutable_kernels(0)->set_correlation_id(std::numeric_limits<uint64_t>::max());
  ASSERT_TRUE(store_->Commit(sid, batch).ok());
  EXPECT_EQ(static_cast<uint64_t>(Query("SELECT MIN(correlation_id) FROM kernels")),
            std::numeric_limits<uint64_t>::max());
}

TEST_F(RankStoreTest, UnknownSessionIsAnError) {
  EXPECT_EQ(store_->Commit(12345, FirstBatch()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RankStoreTest, RefusesAFileFromANewerDaemonWithoutTouchingIt) {
  const std::string newer = dir_.File("newer.sqlite");
  const std::string schema =
      "CREATE TABLE schema_version(version INTEGER NOT NULL);"
      "INSERT INTO schema_version VALUES(" +
      std::to_string(kSchemaVersion + 1) + ");";
  ASSERT_TRUE(SqliteDb::OpenWithSchema(newer, schema.c_str()).ok());
  absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(newer);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(),
              HasSubstr("has schema version " + std::to_string(kSchemaVersion + 1) +
                        "; this flopscoped reads up to " + std::to_string(kSchemaVersion)));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(newer.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(raw, "SELECT COUNT(*) FROM kernels", nullptr, nullptr, nullptr),
            SQLITE_OK);  // the current schema was not applied
  sqlite3_close(raw);
}

TEST_F(RankStoreTest, RefusesAFileThatIsNotADatabase) {
  const std::string bogus = dir_.File("bogus.sqlite");
  FILE* file = fopen(bogus.c_str(), "w");
  ASSERT_NE(file, nullptr);
  fputs("this is not sqlite, just a text file that is long enough to have a header....", file);
  fclose(file);
  EXPECT_FALSE(RankStore::Open(bogus).ok());
}

TEST_F(RankStoreTest, TotalsCountKernelsWithoutMemoryCopiesAndSets) {
  const int64_t sid = OpenSession();
  v1::Batch batch = FirstBatch();
  const uint64_t kernels = static_cast<uint64_t>(batch.kernels_size());
  // The same launch as the first kernel, once as a copy and once as a set.
  for (v1::ActivityKind kind : {v1::ACTIVITY_KIND_MEMCPY, v1::ACTIVITY_KIND_MEMSET}) {
    v1::KernelRecord* memory = batch.add_kernels();
    *memory = batch.kernels(0);
    memory->set_correlation_id(memory->correlation_id() + 1000 + static_cast<uint64_t>(kind));
    memory->set_kind(kind);
    memory->set_bytes(4096);
  }
  ASSERT_TRUE(store_->Commit(sid, batch).ok());
  EXPECT_EQ(store_->Totals().kernels, kernels);
  EXPECT_EQ(static_cast<uint64_t>(Query("SELECT kernels FROM sessions")), kernels);
  EXPECT_EQ(KernelsOnly(batch), kernels);
}

// A writer's page cache stays within RankStore::kWriterCacheKib however much it writes (SQLite's
// default would let it hold 2000 KiB of the file's pages).
TEST(RankStoreCacheTest, TheWriterPageCacheStaysWithinItsBound) {
  fixtures::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = RankStore::OpenDatabase(dir.File("rank.sqlite"));
  ASSERT_TRUE(db.ok()) << db.status();
  // About 4 MB of rows, twice SQLite's default cache, in transactions of about 100 KB.
  ASSERT_TRUE((*db)->Exec("CREATE TABLE filler(v BLOB)").ok());
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO filler SELECT randomblob(100) FROM "
                           "(WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n "
                           "WHERE x < 1000) SELECT x FROM n)")
                    .ok());
  }
  int used = 0;
  int highwater = 0;
  ASSERT_EQ(sqlite3_db_status((*db)->handle(), SQLITE_DBSTATUS_CACHE_USED, &used, &highwater, 0),
            SQLITE_OK);
  EXPECT_GT(used, RankStore::kWriterCacheKib * 1024 / 2);  // it did fill the cache
  // The bound, plus SQLite's own header of each page (under 10 %).
  EXPECT_LE(used, RankStore::kWriterCacheKib * 1024 * 11 / 10);
}

}  // namespace
}  // namespace flopscope::daemon
