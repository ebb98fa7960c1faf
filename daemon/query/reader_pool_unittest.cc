#include "daemon/query/reader_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <memory>
#include <string>

#include "daemon/query/rank_reader.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

class ReaderPoolTest : public ::testing::Test {
 protected:
  // A rank file holding `paths` module paths, committed in one batch (sequence `seq`).
  void Commit(const std::string& name, uint64_t seq, int paths) {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(dir_.File(name));
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<SessionHandle> session =
        (*store)->OpenSession(fixtures::Hello("pool-job", 0, "session"));
    ASSERT_TRUE(session.ok()) << session.status();
    v1::Batch batch;
    batch.set_seq(seq);
    for (int i = 0; i < paths; ++i) {
      fixtures::AddPath(batch, seq * 100 + i, 0, "module" + std::to_string(seq * 100 + i));
    }
    ASSERT_TRUE((*store)->Commit(session->sid, batch).ok());
  }

  size_t PathsThrough(ReaderPool& pool, const std::string& name, SqliteDb** used = nullptr) {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = pool.Take(dir_.File(name));
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return 0;
    if (used != nullptr) *used = db->get();
    absl::StatusOr<RankSnapshot> snapshot = RankReader::Read(**db);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    pool.GiveBack(*std::move(db));
    return snapshot.ok() ? snapshot->paths.size() : 0;
  }

  fixtures::ScopedTempDir dir_;
};

TEST_F(ReaderPoolTest, AConnectionServesTheNextReportAndSeesLaterCommits) {
  Commit("rank-0.sqlite", 1, 2);
  ReaderPool pool(8);
  SqliteDb* first = nullptr;
  SqliteDb* second = nullptr;
  EXPECT_EQ(PathsThrough(pool, "rank-0.sqlite", &first), 2u);
  EXPECT_EQ(pool.idle(), 1u);
  Commit("rank-0.sqlite", 2, 3);  // while the pool holds its connection
  EXPECT_EQ(PathsThrough(pool, "rank-0.sqlite", &second), 5u);
  EXPECT_EQ(first, second);
  EXPECT_EQ(pool.idle(), 1u);
}

TEST_F(ReaderPoolTest, AWarmedConnectionServesTheFirstReport) {
  Commit("rank-0.sqlite", 1, 2);
  ReaderPool pool(8);
  ASSERT_TRUE(pool.Warm(dir_.File("rank-0.sqlite")).ok());
  ASSERT_TRUE(pool.Warm(dir_.File("rank-0.sqlite")).ok());  // already kept: nothing opened
  EXPECT_EQ(pool.idle(), 1u);
  Commit("rank-0.sqlite", 2, 1);
  SqliteDb* used = nullptr;
  EXPECT_EQ(PathsThrough(pool, "rank-0.sqlite", &used), 3u);
  EXPECT_EQ(pool.idle(), 1u);
  EXPECT_EQ(pool.Warm(dir_.File("absent.sqlite")).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool.idle(), 1u);
}

TEST_F(ReaderPoolTest, KeepsTheMostRecentlyUsedUpToItsCapacity) {
  Commit("a.sqlite", 1, 1);
  Commit("b.sqlite", 1, 1);
  ReaderPool pool(1);
  SqliteDb* a = nullptr;
  SqliteDb* b = nullptr;
  SqliteDb* b_again = nullptr;
  PathsThrough(pool, "a.sqlite", &a);
  PathsThrough(pool, "b.sqlite", &b);
  EXPECT_EQ(pool.idle(), 1u);
  PathsThrough(pool, "b.sqlite", &b_again);
  EXPECT_EQ(b, b_again);

  ReaderPool none(0);
  PathsThrough(none, "a.sqlite");
  EXPECT_EQ(none.idle(), 0u);
}

TEST_F(ReaderPoolTest, OneIdleConnectionPerFile) {
  Commit("a.sqlite", 1, 1);
  ReaderPool pool(8);
  absl::StatusOr<std::unique_ptr<SqliteDb>> one = pool.Take(dir_.File("a.sqlite"));
  absl::StatusOr<std::unique_ptr<SqliteDb>> two = pool.Take(dir_.File("a.sqlite"));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_NE(one->get(), two->get());  // two reports at once: two connections
  pool.GiveBack(*std::move(one));
  pool.GiveBack(*std::move(two));
  EXPECT_EQ(pool.idle(), 1u);
}

TEST_F(ReaderPoolTest, AMissingFileIsNotFoundAndNothingIsKept) {
  ReaderPool pool(8);
  absl::StatusOr<std::unique_ptr<SqliteDb>> missing = pool.Take(dir_.File("absent.sqlite"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(ReaderPoolCapacityTest, FollowsTheOpenFileLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 600) GTEST_SKIP() << "hard limit too low";
  rlimit low = saved;
  low.rlim_cur = 512 + 3 * 10;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const size_t ten = ReaderPool::CapacityForFileLimit();
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const size_t none = ReaderPool::CapacityForFileLimit();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(ten, 10u);
  EXPECT_EQ(none, 0u);
  EXPECT_LE(ReaderPool::CapacityForFileLimit(), 4096u);
}

}  // namespace
}  // namespace flopscope::daemon
