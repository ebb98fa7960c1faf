// The forwarding outbox: batches wait until acknowledged, the watermark only rises, everything
// survives a reopen, and the size bound drops (and counts) rather than grows.
#include "daemon/forwarding/outbox.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/forwarding/forwarder.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon::forwarding {
namespace {

using fixtures::Hello;
using fixtures::ScopedTempDir;

constexpr uint32_t kOwner = 1234;

v1::Batch BatchOf(uint64_t seq, size_t payload_bytes = 100) {
  v1::Batch batch;
  batch.set_seq(seq);
  fixtures::AddString(batch, 1, std::string(payload_bytes, 'k'));
  return batch;
}

Outbox::OwnerLookup Owner(int* asked) {
  return [asked]() -> absl::StatusOr<uint32_t> {
    ++*asked;
    return kOwner;
  };
}

std::vector<uint64_t> PendingSeqs(Outbox& outbox, int64_t session, uint64_t after = 0) {
  absl::StatusOr<std::vector<v1::Batch>> batches = outbox.Pending(session, after, 100);
  EXPECT_TRUE(batches.ok()) << batches.status();
  std::vector<uint64_t> seqs;
  if (batches.ok()) {
    for (const v1::Batch& batch : *batches) seqs.push_back(batch.seq());
  }
  return seqs;
}

OutboxSession OnlySession(Outbox& outbox) {
  absl::StatusOr<std::vector<OutboxSession>> sessions = outbox.SessionsWithWork();
  EXPECT_TRUE(sessions.ok()) << sessions.status();
  EXPECT_EQ(sessions.ok() ? sessions->size() : 0, 1u);
  return sessions.ok() && !sessions->empty() ? (*sessions)[0] : OutboxSession{};
}

TEST(OutboxTest, AcknowledgeRemovesUpToTheWatermarkAndResendsAreIgnored) {
  ScopedTempDir dir;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  const v1::SessionHello hello = Hello("job", 0, "s0");
  int asked = 0;
  for (uint64_t seq : {2, 1, 3})
    ASSERT_TRUE((*outbox)->Put(hello, BatchOf(seq), Owner(&asked)).ok());
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(2), Owner(&asked)).ok());  // a producer's resend
  EXPECT_EQ(asked, 1);  // the owner is looked up once per session
  const OutboxSession session = OnlySession(**outbox);
  EXPECT_EQ(session.owner_uid, kOwner);
  EXPECT_EQ(session.acked_seq, 0u);
  EXPECT_EQ(PendingSeqs(**outbox, session.id), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(PendingSeqs(**outbox, session.id, 1), (std::vector<uint64_t>{2, 3}));

  ASSERT_TRUE((*outbox)->Acknowledge(session.id, 2).ok());
  EXPECT_EQ(PendingSeqs(**outbox, session.id), (std::vector<uint64_t>{3}));
  ASSERT_TRUE((*outbox)->Acknowledge(session.id, 1).ok());  // late: the watermark stays
  EXPECT_EQ(OnlySession(**outbox).acked_seq, 2u);
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(2), Owner(&asked)).ok());  // at the watermark
  EXPECT_EQ(PendingSeqs(**outbox, session.id), (std::vector<uint64_t>{3}));

  ASSERT_TRUE((*outbox)->Acknowledge(session.id, 3).ok());
  absl::StatusOr<std::vector<OutboxSession>> left = (*outbox)->SessionsWithWork();
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->pending_batches, 0);
  EXPECT_EQ(totals->pending_bytes, 0);
  EXPECT_EQ(totals->dropped_batches, 0);
}

TEST(OutboxTest, AReopenResumesWithWatermarkTokenAndWaitingBatches) {
  ScopedTempDir dir;
  std::string token;
  const v1::SessionHello hello = Hello("job", 3, "s3");
  int asked = 0;
  {
    auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
    ASSERT_TRUE(outbox.ok()) << outbox.status();
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      ASSERT_TRUE((*outbox)->Put(hello, BatchOf(seq), Owner(&asked)).ok());
    }
    const int64_t id = OnlySession(**outbox).id;
    ASSERT_TRUE((*outbox)->Acknowledge(id, 2).ok());
    token = OnlySession(**outbox).upstream_token;
  }
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  const OutboxSession session = OnlySession(**outbox);
  EXPECT_EQ(session.acked_seq, 2u);
  EXPECT_EQ(session.upstream_token, token);  // the same secret after a restart
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(session.hello.job_id(), "job");
  EXPECT_EQ(session.hello.rank(), 3);
  EXPECT_TRUE(session.hello.resume_token().empty());  // the producer's secret is not kept
  EXPECT_EQ(PendingSeqs(**outbox, session.id), (std::vector<uint64_t>{3, 4}));
  // The watermark came back too: a resend of an acknowledged batch stays out.
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(1), Owner(&asked)).ok());
  EXPECT_EQ(PendingSeqs(**outbox, session.id), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(asked, 1);
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->pending_batches, 2);
  EXPECT_EQ(totals->pending_bytes,
            static_cast<int64_t>(BatchOf(3).ByteSizeLong() + BatchOf(4).ByteSizeLong()));
}

TEST(OutboxTest, AFullOutboxDropsAndCountsUntilAnAckMakesRoom) {
  ScopedTempDir dir;
  const int64_t one = static_cast<int64_t>(BatchOf(1).ByteSizeLong());
  auto outbox = Outbox::Open(OutboxPath(dir.path()), 2 * one);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  const v1::SessionHello hello = Hello("job", 0, "s0");
  int asked = 0;
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(1), Owner(&asked)).ok());
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(2), Owner(&asked)).ok());
  const absl::Status full = (*outbox)->Put(hello, BatchOf(3), Owner(&asked));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("--outbox-max-mb"), absl::string_view::npos) << full;
  const int64_t id = OnlySession(**outbox).id;
  ASSERT_TRUE((*outbox)->Acknowledge(id, 1).ok());
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(4), Owner(&asked)).ok());
  EXPECT_EQ(PendingSeqs(**outbox, id), (std::vector<uint64_t>{2, 4}));
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->dropped_batches, 1);
  EXPECT_EQ(totals->pending_bytes, 2 * one);
}

TEST(OutboxTest, ABatchRefusedUpstreamIsDroppedAndCounted) {
  ScopedTempDir dir;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  int asked = 0;
  const v1::SessionHello hello = Hello("job", 1, "s1");
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE((*outbox)->Put(hello, BatchOf(seq), Owner(&asked)).ok());
  }
  const int64_t id = OnlySession(**outbox).id;
  ASSERT_TRUE((*outbox)->DropRefused(id, 2).ok());
  ASSERT_TRUE((*outbox)->DropRefused(id, 2).ok());  // gone already: not counted twice
  EXPECT_EQ(PendingSeqs(**outbox, id), (std::vector<uint64_t>{1, 3}));
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->dropped_batches, 1);
  EXPECT_EQ(totals->pending_batches, 2);
}

TEST(OutboxTest, SessionsAreKeptApart) {
  ScopedTempDir dir;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  int asked = 0;
  ASSERT_TRUE((*outbox)->Put(Hello("job", 0, "a"), BatchOf(1), Owner(&asked)).ok());
  ASSERT_TRUE((*outbox)->Put(Hello("job", 1, "b"), BatchOf(1), Owner(&asked)).ok());
  ASSERT_TRUE((*outbox)->Put(Hello("job", 1, "b"), BatchOf(2), Owner(&asked)).ok());
  absl::StatusOr<std::vector<OutboxSession>> sessions = (*outbox)->SessionsWithWork();
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 2u);
  EXPECT_EQ(asked, 2);
  EXPECT_NE((*sessions)[0].upstream_token, (*sessions)[1].upstream_token);
  ASSERT_TRUE((*outbox)->Acknowledge((*sessions)[1].id, 2).ok());
  EXPECT_EQ(PendingSeqs(**outbox, (*sessions)[0].id), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(PendingSeqs(**outbox, (*sessions)[1].id).empty());
}

TEST(OutboxTest, FindKnowsASessionAfterItsBatchesLeft) {
  ScopedTempDir dir;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  absl::StatusOr<std::optional<OutboxSession>> none = (*outbox)->Find("job", 0, "s0");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  int asked = 0;
  const v1::SessionHello hello = Hello("job", 0, "s0");
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(1), Owner(&asked)).ok());
  const OutboxSession waiting = OnlySession(**outbox);
  ASSERT_TRUE((*outbox)->Acknowledge(waiting.id, 1).ok());
  // Nothing waits, yet a live session is still known (its stream upstream stays open).
  absl::StatusOr<std::optional<OutboxSession>> found = (*outbox)->Find("job", 0, "s0");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, waiting.id);
  EXPECT_EQ((*found)->acked_seq, 1u);
  EXPECT_EQ((*found)->upstream_token, waiting.upstream_token);
  EXPECT_EQ((*found)->owner_uid, kOwner);
  EXPECT_FALSE((*outbox)->Find("job", 1, "s0")->has_value());
}

TEST(OutboxTest, TheOldestWaitingPutTimeIsTheLagsStart) {
  ScopedTempDir dir;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  EXPECT_EQ((*outbox)->Totals()->oldest_put_ns, 0);  // nothing waits: no lag
  int asked = 0;
  const v1::SessionHello hello = Hello("job", 0, "s0");
  const int64_t before = absl::GetCurrentTimeNanos();
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(1), Owner(&asked)).ok());
  absl::SleepFor(absl::Milliseconds(5));
  const int64_t middle = absl::GetCurrentTimeNanos();
  ASSERT_TRUE((*outbox)->Put(hello, BatchOf(2), Owner(&asked)).ok());
  const int64_t first_put = (*outbox)->Totals()->oldest_put_ns;
  EXPECT_GE(first_put, before);
  EXPECT_LT(first_put, middle);
  // Once the oldest is acknowledged the next one is the oldest; once all are, none.
  ASSERT_TRUE((*outbox)->Acknowledge(OnlySession(**outbox).id, 1).ok());
  EXPECT_GE((*outbox)->Totals()->oldest_put_ns, middle);
  ASSERT_TRUE((*outbox)->Acknowledge(OnlySession(**outbox).id, 2).ok());
  EXPECT_EQ((*outbox)->Totals()->oldest_put_ns, 0);
}

TEST(OutboxTest, AFileFromBeforePutTimesGetsTheColumnItsBatchesWaitingSinceTheUpgrade) {
  ScopedTempDir dir;
  const std::string path = OutboxPath(dir.path());
  {
    // outbox_batches as it was before put_ns, with one batch waiting.
    absl::StatusOr<std::unique_ptr<SqliteDb>> old = SqliteDb::OpenWithSchema(
        path,
        "CREATE TABLE outbox_batches(session INTEGER NOT NULL, seq INTEGER NOT NULL, batch BLOB "
        "NOT NULL, PRIMARY KEY(session, seq)) WITHOUT ROWID;"
        "INSERT INTO outbox_batches VALUES (1, 1, x'00');");
    ASSERT_TRUE(old.ok()) << old.status();
  }
  const int64_t upgraded = absl::GetCurrentTimeNanos();
  auto outbox = Outbox::Open(path, kDefaultOutboxMaxBytes);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_EQ(totals->pending_batches, 1);
  EXPECT_GE(totals->oldest_put_ns, upgraded);  // waiting since the upgrade at least
  int asked = 0;
  ASSERT_TRUE((*outbox)->Put(Hello("job", 0, "s0"), BatchOf(1), Owner(&asked)).ok());
}

TEST(UpstreamChannelTest, PlainTcpIsRefusedWithTheFix) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> plain = UpstreamChannel("agg:7070", {});
  EXPECT_TRUE(absl::IsInvalidArgument(plain.status())) << plain.status();
  EXPECT_NE(plain.status().message().find("--tls-cert"), absl::string_view::npos);
  EXPECT_TRUE(UpstreamChannel("unix:/run/flopscope/aggregator.sock", {}).ok());
}

}  // namespace
}  // namespace flopscope::daemon::forwarding
