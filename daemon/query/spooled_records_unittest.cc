// Records waiting in spool files leave the NOT_ARRIVED loss they are counted in, and only it:
// per rank, per job listing and per report.

#include "daemon/query/spooled_records.h"

#include <gtest/gtest.h>

namespace flopscope::daemon {
namespace {

void AddLoss(google::protobuf::RepeatedPtrField<v1::LossCounter>* losses, v1::LossCause cause,
             uint64_t records) {
  v1::LossCounter* loss = losses->Add();
  loss->set_cause(cause);
  loss->set_records(records);
}

uint64_t LossOf(const google::protobuf::RepeatedPtrField<v1::LossCounter>& losses,
                v1::LossCause cause) {
  for (const v1::LossCounter& loss : losses) {
    if (loss.cause() == cause) return loss.records();
  }
  return 0;
}

v1::RankInfo Rank(int32_t number, uint64_t not_arrived) {
  v1::RankInfo rank;
  rank.set_rank(number);
  AddLoss(rank.mutable_losses(), v1::LOSS_CAUSE_BUFFER_FULL, 5);
  if (not_arrived > 0) AddLoss(rank.mutable_losses(), v1::LOSS_CAUSE_NOT_ARRIVED, not_arrived);
  return rank;
}

TEST(SpooledRecordsTest, WaitingRecordsLeaveTheNotArrivedLossOnly) {
  v1::RankInfo rank = Rank(0, 100);
  EXPECT_EQ(MoveSpooledOutOfLosses(30, &rank), 30u);
  EXPECT_EQ(rank.spooled_records(), 30u);
  EXPECT_EQ(LossOf(rank.losses(), v1::LOSS_CAUSE_NOT_ARRIVED), 70u);
  EXPECT_EQ(LossOf(rank.losses(), v1::LOSS_CAUSE_BUFFER_FULL), 5u);
}

TEST(SpooledRecordsTest, NoMoreLeavesTheLossThanItCounted) {
  // A live process's spool is never counted; a spool beside a session that announced less than
  // it spooled moves what the loss held.
  v1::RankInfo rank = Rank(0, 10);
  EXPECT_EQ(MoveSpooledOutOfLosses(30, &rank), 10u);
  EXPECT_EQ(rank.spooled_records(), 30u);
  EXPECT_EQ(LossOf(rank.losses(), v1::LOSS_CAUSE_NOT_ARRIVED), 0u);
  v1::RankInfo without = Rank(1, 0);
  EXPECT_EQ(MoveSpooledOutOfLosses(7, &without), 0u);
  EXPECT_EQ(LossOf(without.losses(), v1::LOSS_CAUSE_BUFFER_FULL), 5u);
}

TEST(SpooledRecordsTest, AJobSumsItsRanks) {
  std::vector<v1::RankInfo> ranks = {Rank(0, 50), Rank(1, 0), Rank(2, 40)};
  const SpooledTotals totals = MoveSpooledOutOfLosses({{0, 20}, {1, 7}}, &ranks);
  EXPECT_EQ(totals.waiting, 27u);
  EXPECT_EQ(totals.moved, 20u);
  EXPECT_EQ(LossOf(ranks[0].losses(), v1::LOSS_CAUSE_NOT_ARRIVED), 30u);
  EXPECT_EQ(LossOf(ranks[2].losses(), v1::LOSS_CAUSE_NOT_ARRIVED), 40u) << "nothing waits";
  EXPECT_EQ(ranks[2].spooled_records(), 0u);
}

TEST(SpooledRecordsTest, AReportTakesItsRanksWaitingOutOfItsLosses) {
  v1::Report report;
  report.add_ranks()->set_spooled_records(20);
  report.add_ranks()->set_spooled_records(7);
  AddLoss(report.mutable_losses(), v1::LOSS_CAUSE_NOT_ARRIVED, 100);
  MoveSpooledOutOfLosses(&report);
  EXPECT_EQ(report.spooled_records(), 27u);
  EXPECT_EQ(LossOf(report.losses(), v1::LOSS_CAUSE_NOT_ARRIVED), 73u);
}

}  // namespace
}  // namespace flopscope::daemon
