// InstanceIdSet: the intervals of a session's stored range instance ids, and the rows each Add
// changes, checked against a plain set of the same ids.

#include "daemon/store/instance_id_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace flopscope::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(InstanceIdSetTest, NestedRangesArriveChildFirstAndCloseTheirGaps) {
  InstanceIdSet ids;
  // push 1, push 2, push 3, pop 3, pop 2, push 4, pop 4, pop 1: sent 3, 2, 4, 1.
  InstanceIdSet::Change change = ids.Add(std::vector<uint64_t>{3, 2});
  EXPECT_THAT(ids.Intervals(), ElementsAre(Pair(2, 3)));
  EXPECT_THAT(change.written, ElementsAre(Pair(2, 3)));
  EXPECT_TRUE(change.removed.empty()) << "3 was made and merged in the same Add: never written";
  change = ids.Add(std::vector<uint64_t>{4});
  EXPECT_THAT(change.written, ElementsAre(Pair(2, 4)));
  change = ids.Add(std::vector<uint64_t>{1});
  EXPECT_THAT(ids.Intervals(), ElementsAre(Pair(1, 4)));
  EXPECT_THAT(change.written, ElementsAre(Pair(1, 4)));
  EXPECT_THAT(change.removed, ElementsAre(2u));  // the row [2, 4] goes
  for (uint64_t id : {1, 2, 3, 4}) EXPECT_TRUE(ids.Contains(id)) << id;
  EXPECT_FALSE(ids.Contains(0));
  EXPECT_FALSE(ids.Contains(5));
}

TEST(InstanceIdSetTest, TheExtremesDoNotWrap) {
  InstanceIdSet ids;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  ids.Add(std::vector<uint64_t>{max, 0});
  EXPECT_THAT(ids.Intervals(), ElementsAre(Pair(0, 0), Pair(max, max)));
  ids.Add(std::vector<uint64_t>{max - 1, 1});
  EXPECT_THAT(ids.Intervals(), ElementsAre(Pair(0, 1), Pair(max - 1, max)));
}

TEST(InstanceIdSetTest, AgreesWithASetAndItsRowsReplayToTheSameIntervals) {
  std::mt19937_64 random(7);
  InstanceIdSet ids;
  std::set<uint64_t> reference;
  std::map<uint64_t, uint64_t> rows;  // what the table holds after applying every Change
  std::vector<uint64_t> pool(3000);
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = i + 1;
  std::shuffle(pool.begin(), pool.end(), random);
  for (size_t next = 0; next < 2000;) {  // 2000 of 3000 ids, in batches of 1..50
    const size_t size = std::min<size_t>(1 + random() % 50, 2000 - next);
    std::vector<uint64_t> batch(pool.begin() + next, pool.begin() + next + size);
    next += size;
    const InstanceIdSet::Change change = ids.Add(batch);
    for (uint64_t lo : change.removed) rows.erase(lo);
    for (const auto& [lo, hi] : change.written) rows[lo] = hi;
    reference.insert(batch.begin(), batch.end());
  }
  for (uint64_t id = 0; id <= 3001; ++id) {
    ASSERT_EQ(ids.Contains(id), reference.contains(id)) << id;
  }
  const std::vector<InstanceIdSet::Interval> intervals = ids.Intervals();
  EXPECT_EQ(std::vector<InstanceIdSet::Interval>(rows.begin(), rows.end()), intervals);
  InstanceIdSet reloaded;  // a resumed session reads the rows back
  for (const auto& interval : rows) reloaded.Insert(interval);
  for (uint64_t id : pool) EXPECT_EQ(reloaded.Contains(id), reference.contains(id));
}

}  // namespace
}  // namespace flopscope::daemon
