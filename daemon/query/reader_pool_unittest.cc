#include "daemon/query/reader_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

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

  // A rank file's writer with one committed batch, left open (as ingest holds it).
  std::unique_ptr<RankStore> Writer(const std::string& name) {
    absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(dir_.File(name));
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return nullptr;
    absl::StatusOr<SessionHandle> session =
        (*store)->OpenSession(fixtures::Hello("pool-job", 0, "session"));
    EXPECT_TRUE(session.ok()) << session.status();
    v1::Batch batch;
    batch.set_seq(1);
    fixtures::AddPath(batch, 1, 0, "module");
    EXPECT_TRUE(session.ok() && (*store)->Commit(session->sid, batch).ok());
    return *std::move(store);
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

// The descriptors this process holds now.
size_t OpenDescriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

// What campaign row 5c' measured: a connection warmed while ingest's writer holds the file (the
// query side warms one per connected rank) keeps, once the writer closed, the descriptors the
// capacity counts, not fewer.
TEST_F(ReaderPoolTest, AnIdleConnectionHoldsNoMoreDescriptorsThanItsCapacityCounts) {
  constexpr int kFiles = 8;
  ReaderPool pool(kFiles);
  const size_t before = OpenDescriptors();
  std::vector<std::unique_ptr<RankStore>> writers;
  for (int i = 0; i < kFiles; ++i) {
    writers.push_back(Writer("rank-" + std::to_string(i) + ".sqlite"));
    ASSERT_NE(writers.back(), nullptr);
    ASSERT_TRUE(pool.Warm(dir_.File("rank-" + std::to_string(i) + ".sqlite")).ok());
  }
  const size_t live = OpenDescriptors() - before;
  writers.clear();  // the sessions end; the pool keeps its connections
  const size_t idle = OpenDescriptors() - before;
  EXPECT_EQ(pool.idle(), static_cast<size_t>(kFiles));
  EXPECT_GT(live, idle);  // the writers' WAL and database descriptors were let go
  EXPECT_LE(idle, kFiles * ReaderPool::kDescriptorsPerIdleConnection);
}

// Campaign row 5c' in one process: under an open-file limit at which the old count (3 per
// connection) let the pool alone outgrow the limit, the pool fills to its capacity, each
// connection warmed beside a writer as ingest does, and then new sessions beside it
// pool holds still open their writers and their readers (32 of them: the time a file takes).
TEST_F(ReaderPoolTest, AFullPoolLeavesIngestRoomUnderTheOpenFileLimit) {
  constexpr rlim_t kLimit = 2560;
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < kLimit) GTEST_SKIP() << "hard limit low";
  rlimit low = saved;
  low.rlim_cur = kLimit;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const size_t capacity = ReaderPool::CapacityForFileLimit();
  ReaderPool pool(capacity);
  // Copies of one rank file, each opened by a writer while the pool warms its connection.
  Writer("template.sqlite").reset();
  for (size_t i = 0; i < capacity && !HasFailure(); ++i) {
    const std::string name = "old-" + std::to_string(i) + ".sqlite";
    std::filesystem::copy_file(dir_.File("template.sqlite"), dir_.File(name));
    absl::StatusOr<std::unique_ptr<RankStore>> writer = RankStore::Open(dir_.File(name));
    ASSERT_TRUE(writer.ok()) << "file " << i << ": " << writer.status();
    ASSERT_TRUE(pool.Warm(dir_.File(name)).ok()) << "file " << i;
  }
  EXPECT_EQ(pool.idle(), capacity);
  std::vector<std::unique_ptr<RankStore>> sessions;
  for (size_t i = 0; i < 32 && !HasFailure(); ++i) {
    const std::string name = "new-" + std::to_string(i) + ".sqlite";
    sessions.push_back(Writer(name));
    ASSERT_NE(sessions.back(), nullptr) << "session " << i << " of " << capacity;
    ASSERT_TRUE(pool.Warm(dir_.File(name)).ok()) << "session " << i;
  }
  EXPECT_LE(OpenDescriptors(), static_cast<size_t>(kLimit));
  sessions.clear();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST(ReaderPoolCapacityTest, FollowsTheOpenFileLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 600) GTEST_SKIP() << "hard limit too low";
  rlimit low = saved;
  low.rlim_cur =
      ReaderPool::kReservedDescriptors + 2 * ReaderPool::kDescriptorsPerIdleConnection * 10;
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
