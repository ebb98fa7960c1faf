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

// What a batch handed out weighs in the outbox: without the counter Pending adds.
int64_t StoredSize(v1::Batch batch) {
  auto* losses = batch.mutable_losses();
  for (auto it = losses->begin(); it != losses->end();) {
    it = it->cause() == v1::LOSS_CAUSE_FORWARD_DROPPED ? losses->erase(it) : it + 1;
  }
  return static_cast<int64_t>(batch.ByteSizeLong());
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

// A batch of `records` range events (records as a producer counts them), `payload_bytes` big.
v1::Batch BatchWith(uint64_t seq, int records, size_t payload_bytes = 100) {
  v1::Batch batch = BatchOf(seq, payload_bytes);
  for (int i = 0; i < records; ++i) fixtures::AddRange(batch, 1, i, i + 1);
  return batch;
}

// The batch's LOSS_CAUSE_FORWARD_DROPPED counter (0 when it carries none).
uint64_t ForwardDropped(const v1::Batch& batch) {
  for (const v1::LossCounter& loss : batch.losses()) {
    if (loss.cause() == v1::LOSS_CAUSE_FORWARD_DROPPED) return loss.records();
  }
  return 0;
}

TEST(OutboxTest, AFullOutboxDropsAndCountsUntilAnAckMakesRoom) {
  ScopedTempDir dir;
  const int64_t one = static_cast<int64_t>(BatchWith(1, 5).ByteSizeLong());
  // Room for two batches and a dropped one's stub.
  auto outbox = Outbox::Open(OutboxPath(dir.path()), 2 * one + 64);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  const v1::SessionHello hello = Hello("job", 0, "s0");
  int asked = 0;
  ASSERT_TRUE((*outbox)->Put(hello, BatchWith(1, 5), Owner(&asked)).ok());
  ASSERT_TRUE((*outbox)->Put(hello, BatchWith(2, 5), Owner(&asked)).ok());
  const absl::Status full = (*outbox)->Put(hello, BatchWith(3, 5), Owner(&asked));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("--outbox-max-mb"), absl::string_view::npos) << full;
  // A resend of one that waits is no drop.
  EXPECT_TRUE((*outbox)->Put(hello, BatchWith(2, 5), Owner(&asked)).ok());
  const int64_t id = OnlySession(**outbox).id;
  ASSERT_TRUE((*outbox)->Acknowledge(id, 1).ok());
  ASSERT_TRUE((*outbox)->Put(hello, BatchWith(4, 5), Owner(&asked)).ok());
  // Batch 3's stub waits in its place: no records, and every batch handed out carries the
  // session's dropped records.
  absl::StatusOr<std::vector<v1::Batch>> pending = (*outbox)->Pending(id, 0, 10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 3u);
  EXPECT_EQ((*pending)[0].seq(), 2u);
  EXPECT_EQ((*pending)[0].ranges_size(), 5);
  EXPECT_EQ((*pending)[1].seq(), 3u);
  EXPECT_EQ((*pending)[1].ranges_size(), 0);
  EXPECT_EQ((*pending)[2].seq(), 4u);
  for (const v1::Batch& batch : *pending) EXPECT_EQ(ForwardDropped(batch), 5u) << batch.seq();
  absl::StatusOr<OutboxTotals> totals = (*outbox)->Totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->dropped_batches, 1);
  EXPECT_EQ(totals->dropped_records, 5);
  EXPECT_EQ(totals->pending_bytes,
            StoredSize((*pending)[0]) + StoredSize((*pending)[1]) + StoredSize((*pending)[2]));
}

TEST(OutboxTest, ADroppedFinalBatchStillReachesTheAggregatorAsAStubWithTheCount) {
  ScopedTempDir dir;
  // Room for the first batch only (range instance ids, so sizes, vary by a byte or two).
  const int64_t one = static_cast<int64_t>(BatchWith(1, 3).ByteSizeLong()) + 8;
  auto outbox = Outbox::Open(OutboxPath(dir.path()), one);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  const v1::SessionHello hello = Hello("job", 2, "s2");
  int asked = 0;
  ASSERT_TRUE((*outbox)->Put(hello, BatchWith(1, 3), Owner(&asked)).ok());
  v1::Batch second = BatchWith(2, 7);
  fixtures::AddLoss(second, v1::LOSS_CAUSE_BUFFER_FULL, 4);  // the producer's own count
  EXPECT_TRUE(absl::IsResourceExhausted((*outbox)->Put(hello, second, Owner(&asked))));
  v1::Batch last = BatchWith(3, 11);
  last.set_final(true);
  EXPECT_TRUE(absl::IsResourceExhausted((*outbox)->Put(hello, last, Owner(&asked))));
  // The producer resends the final batch (its node crashed before the Ack): counted once.
  EXPECT_TRUE((*outbox)->Put(hello, last, Owner(&asked)).ok());
  const int64_t id = OnlySession(**outbox).id;
  // Batch 1 went up before the drops: the aggregator learns of them from the one stub, which
  // is the final batch's seq, final, and keeps the producer's counters of both.
  ASSERT_TRUE((*outbox)->Acknowledge(id, 1).ok());
  absl::StatusOr<std::vector<v1::Batch>> pending = (*outbox)->Pending(id, 1, 10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  const v1::Batch& stub = (*pending)[0];
  EXPECT_EQ(stub.seq(), 3u);
  EXPECT_TRUE(stub.final());
  EXPECT_EQ(stub.ranges_size(), 0);
  EXPECT_EQ(ForwardDropped(stub), 7u + 11u);
  ASSERT_EQ(stub.losses_size(), 2);
  // The count survives a reopen, and a later resend of a dropped batch stays out.
  outbox->reset();
  outbox = Outbox::Open(OutboxPath(dir.path()), one);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  EXPECT_TRUE((*outbox)->Put(hello, second, Owner(&asked)).ok());
  EXPECT_EQ(PendingSeqs(**outbox, id), (std::vector<uint64_t>{3}));
  pending = (*outbox)->Pending(id, 0, 10);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(ForwardDropped((*pending)[0]), 18u);
  EXPECT_EQ((*outbox)->Totals()->dropped_records, 18);
  // Once the aggregator has it, nothing waits.
  ASSERT_TRUE((*outbox)->Acknowledge(id, 3).ok());
  EXPECT_TRUE((*outbox)->SessionsWithWork()->empty());
  EXPECT_EQ((*outbox)->Totals()->pending_bytes, 0);
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
