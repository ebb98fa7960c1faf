#include "daemon/store/rank_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/query/rank_reader.h"
#include "daemon/store/rank_store.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_queries.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// schema/rank.sql as version 1 shipped it (comments left out): the files the upgrade must take.
constexpr char kVersion1Sql[] = R"sql(
CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM schema_version);
CREATE TABLE IF NOT EXISTS sessions(
  sid INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL UNIQUE,
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  local_rank INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  injector_version TEXT NOT NULL,
  start_time_ns INTEGER NOT NULL,
  command TEXT NOT NULL,
  gpu_status TEXT NOT NULL,
  hello BLOB NOT NULL,
  last_seq INTEGER NOT NULL DEFAULT 0,
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL,
  range_events INTEGER NOT NULL DEFAULT 0,
  kernels INTEGER NOT NULL DEFAULT 0,
  final INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS strings(
  sid INTEGER NOT NULL,
  id INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(sid, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS range_paths(
  sid INTEGER NOT NULL,
  id INTEGER NOT NULL,
  parent_id INTEGER NOT NULL,
  domain TEXT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(sid, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS range_events(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  parent_instance_id INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  kind INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kernels(
  sid INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  range_instance_id INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  context_id INTEGER NOT NULL,
  stream_id INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  grid_x INTEGER NOT NULL,
  grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL,
  block_x INTEGER NOT NULL,
  block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  graph_id INTEGER NOT NULL,
  graph_node_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kernel_flops(
  sid INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  fp64 REAL NOT NULL,
  fp32 REAL NOT NULL,
  fp16 REAL NOT NULL,
  tensor TEXT NOT NULL,
  raw BLOB NOT NULL,
  counted_step INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS metadata(
  sid INTEGER NOT NULL,
  time_ns INTEGER NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS losses(
  sid INTEGER NOT NULL,
  cause INTEGER NOT NULL,
  records INTEGER NOT NULL,
  PRIMARY KEY(sid, cause)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS module_stats(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  calls INTEGER NOT NULL DEFAULT 0,
  cpu_time_ns INTEGER NOT NULL DEFAULT 0,
  min_ns INTEGER,
  max_ns INTEGER,
  kernels INTEGER NOT NULL DEFAULT 0,
  gpu_time_ns INTEGER NOT NULL DEFAULT 0,
  flops REAL,
  PRIMARY KEY(sid, path_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_stats(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  count INTEGER NOT NULL DEFAULT 0,
  time_ns INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, path_id, kind)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS instance_stats(
  sid INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  kernels INTEGER NOT NULL,
  first_start_ns INTEGER NOT NULL,
  last_end_ns INTEGER NOT NULL,
  busy_ns INTEGER NOT NULL,
  PRIMARY KEY(sid, instance_id)
) WITHOUT ROWID;
)sql";

// Version 1 rows as an import with counters left them: session 1 has model (1) / layer (2), two
// kernels with counters in steps 3 and 4, and module_stats holding their FLOPs; session 2 has
// one counted kernel outside any step (counted_step 0 stood for "none" then).
constexpr char kVersion1Rows[] = R"sql(
INSERT INTO range_paths VALUES(1, 1, 0, '', 'model'), (1, 2, 1, '', 'layer');
INSERT INTO strings VALUES(1, 1, 'gemm');
INSERT INTO range_events VALUES(1, 2, 10, 0, 77, 1700000000000000000, 1700000000000001000, 1);
INSERT INTO kernels VALUES
  (1, 501, 2, 10, 1, 0, 1, 7, 1700000000000000100, 1700000000000000300, 1,1,1, 1,1,1, 1, 0, 0, 0),
  (1, 502, 1, 0, 1, 0, 1, 7, 1700000000000000400, 1700000000000000500, 1,1,1, 1,1,1, 1, 0, 0, 0),
  (2, 601, 0, 0, 1, 0, 1, 7, 1700000000000000400, 1700000000000000500, 1,1,1, 1,1,1, 1, 0, 0, 0);
INSERT INTO kernel_flops VALUES
  (1, 501, 0, 100, 0, '{"fp16_dst_fp32":50}', x'', 3),
  (1, 502, 7, 0, 2, '{}', x'', 4),
  (2, 601, 0, 9, 0, '{}', x'', 0);
INSERT INTO module_stats VALUES(1, 2, 1, 1000, 1000, 1000, 1, 200, 150),
                               (1, 1, 0, 0, NULL, NULL, 1, 100, 9),
                               (2, 0, 0, 0, NULL, NULL, 1, 100, 9);
)sql";

class RankSchemaTest : public ::testing::Test {
 protected:
  // A version 1 file holding kVersion1Rows and the session whose hello is `hello_`.
  std::string WriteVersion1File(const std::string& name) {
    const std::string path = dir_.File(name);
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenWithSchema(path, kVersion1Sql);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return path;
    absl::StatusOr<std::unique_ptr<SqliteStatement>> session = (*db)->Prepare(
        "INSERT INTO sessions(sid, session_id, job_id, rank, local_rank, world_size, host, pid, "
        "injector_version, start_time_ns, command, gpu_status, hello, last_seq, first_seen_ns, "
        "last_seen_ns) VALUES(?, ?, 'job-1', 0, 0, 1, 'node-1', 1, 'v1', 0, 'import', '', ?, 1, "
        "0, 0)");
    EXPECT_TRUE(session.ok());
    for (int64_t sid : {1, 2}) {
      const std::string id = "import-" + std::to_string(sid);
      const std::string hello = fixtures::Hello("job-1", 0, id).SerializeAsString();
      (*session)->BindInt(1, sid);
      (*session)->BindText(2, id);
      (*session)->BindBlob(3, hello);
      EXPECT_TRUE((*session)->Run().ok());
    }
    EXPECT_TRUE((*db)->Exec(kVersion1Rows).ok());
    return path;
  }

  static int64_t Query(const std::string& path, const std::string& sql) {
    return static_cast<int64_t>(fixtures::QueryNumber(path, sql));
  }

  fixtures::ScopedTempDir dir_;
};

TEST_F(RankSchemaTest, TheOldSchemaTextReallyIsVersion1) {
  const std::string path = WriteVersion1File("old.sqlite");
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), 1);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM pragma_table_info('kernels') WHERE name = 'counted'"),
            0);
}

TEST_F(RankSchemaTest, StoreUpgradesAVersion1FileInPlace) {
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), kSchemaVersion);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM schema_version"), 1);
  for (const char* column : {"counted"}) {
    for (const char* table : {"range_events", "kernels"}) {
      EXPECT_EQ(Query(path, std::string("SELECT COUNT(*) FROM pragma_table_info('") + table +
                                "') WHERE name = '" + column + "'"),
                1)
          << table;
    }
  }
  // Old rows read as uncounted; kernel_flops got their kernels' attribution.
  EXPECT_EQ(Query(path, "SELECT SUM(counted) FROM kernels"), 0);
  EXPECT_EQ(Query(path, "SELECT path_id FROM kernel_flops WHERE correlation_id = 501"), 2);
  EXPECT_EQ(Query(path, "SELECT range_instance_id FROM kernel_flops WHERE correlation_id = 501"),
            10);
  EXPECT_EQ(Query(path, "SELECT name_id FROM kernel_flops WHERE correlation_id = 502"), 1);
  EXPECT_EQ(Query(path, "SELECT phase_path_id FROM kernel_flops WHERE correlation_id = 502"), 0);
  // The new rollups, from the counters the file held.
  EXPECT_EQ(Query(path,
                  "SELECT flops FROM module_flops WHERE sid = 1 AND path_id = 2 AND "
                  "precision = 'fp32'"),
            100);
  EXPECT_EQ(Query(path,
                  "SELECT flops FROM module_flops WHERE sid = 1 AND path_id = 2 AND "
                  "precision = 'tensor:fp16_dst_fp32'"),
            50);
  EXPECT_EQ(Query(path,
                  "SELECT kernels FROM module_flops WHERE sid = 1 AND path_id = 1 AND "
                  "precision = 'fp64'"),
            1);
  EXPECT_EQ(Query(path,
                  "SELECT flops FROM module_flops WHERE sid = 1 AND path_id = 1 AND "
                  "precision = 'fp16'"),
            2);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM module_flops"), 5);
  EXPECT_EQ(Query(path, "SELECT counted_kernels FROM module_stats WHERE sid = 1 AND path_id = 2"),
            1);
  EXPECT_EQ(Query(path, "SELECT counted_kernels FROM module_stats WHERE sid = 2 AND path_id = 0"),
            1);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM counted_steps WHERE sid = 1"), 2);
  EXPECT_EQ(Query(path, "SELECT step FROM counted_steps WHERE sid = 2"), 0);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM phase_flops"), 0);
}

TEST_F(RankSchemaTest, UpgradingTwiceChangesNothing) {
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  ASSERT_TRUE(RankStore::Open(path).ok());
  absl::StatusOr<std::unique_ptr<RankStore>> again = RankStore::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM module_flops"), 5);
  EXPECT_EQ(Query(path, "SELECT SUM(flops) FROM module_flops"), 100 + 50 + 7 + 2 + 9);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM counted_steps"), 3);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM schema_version"), 1);
}

TEST_F(RankSchemaTest, AColumnAlreadyAddedByAnInterruptedUpgradeIsKept) {
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("ALTER TABLE kernels ADD COLUMN counted INTEGER NOT NULL DEFAULT 0; "
                           "UPDATE kernels SET counted = 1 WHERE correlation_id = 601")
                    .ok());
  }
  ASSERT_TRUE(RankStore::Open(path).ok());
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), kSchemaVersion);
  EXPECT_EQ(Query(path, "SELECT SUM(counted) FROM kernels"), 1);
}

TEST_F(RankSchemaTest, UpgradedSessionsTakeNewBatches) {
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  absl::StatusOr<std::unique_ptr<RankStore>> store = RankStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<SessionHandle> session =
      (*store)->OpenSession(fixtures::Hello("job-1", 0, "import-1"));
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->committed_seq, 1u);
  v1::Batch batch;
  batch.set_seq(2);
  fixtures::AddKernelFlops(batch, 2, 1, 5)->mutable_flops()->set_fp32(60);
  ASSERT_TRUE((*store)->Commit(session->sid, batch).ok());
  EXPECT_EQ(Query(path,
                  "SELECT flops FROM module_flops WHERE sid = 1 AND path_id = 2 AND "
                  "precision = 'fp32'"),
            160);
  EXPECT_EQ(Query(path, "SELECT flops FROM module_stats WHERE sid = 1 AND path_id = 2"), 210);
  EXPECT_EQ(Query(path, "SELECT COUNT(*) FROM counted_steps WHERE sid = 1"), 3);
}

TEST_F(RankSchemaTest, AReportUpgradesTheFileOfAFinishedJob) {
  // No store ever opens the files of jobs that ended before the daemon was upgraded.
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  absl::StatusOr<RankSnapshot> snapshot = RankReader::Read(path);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), kSchemaVersion);
  EXPECT_EQ(snapshot->module_flops.size(), 5u);
  // Session 1: steps 3 and 4; session 2: counted_step 0 (version 1's "none") reads as one step.
  EXPECT_EQ(snapshot->counted_steps, 3u);
  EXPECT_TRUE(snapshot->windows.empty());
}

TEST_F(RankSchemaTest, FailsClearlyOnAFileThatIsNotARankFile) {
  const std::string path = dir_.File("catalog-like.sqlite");
  ASSERT_TRUE(SqliteDb::OpenWithSchema(path,
                                       "CREATE TABLE schema_version(version INTEGER NOT NULL);"
                                       "INSERT INTO schema_version VALUES(1);"
                                       "CREATE TABLE kernels(x INTEGER);")
                  .ok());
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  ASSERT_TRUE(db.ok());
  const absl::Status status = RankSchema::Upgrade(**db);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cannot upgrade"));
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), 1) << "rolled back";
}

// A version 2 file (written before windows counted excluded communication kernels) gains only
// that column; its rollups are left as they were (they were complete already).
TEST_F(RankSchemaTest, AVersion2FileGainsTheExcludedCountAndKeepsItsRollups) {
  const std::string path = WriteVersion1File("rank-00000.sqlite");
  ASSERT_TRUE(RankStore::Open(path).ok());  // now current
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("ALTER TABLE counter_windows DROP COLUMN comm_kernels_excluded; "
                           "UPDATE schema_version SET version = 2; "
                           "UPDATE module_stats SET counted_kernels = 41 WHERE path_id = 2")
                    .ok());
  }
  EXPECT_EQ(Query(path,
                  "SELECT COUNT(*) FROM pragma_table_info('counter_windows') WHERE name = "
                  "'comm_kernels_excluded'"),
            0);
  absl::StatusOr<RankSnapshot> snapshot = RankReader::Read(path);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Query(path, "SELECT version FROM schema_version"), kSchemaVersion);
  EXPECT_EQ(Query(path,
                  "SELECT COUNT(*) FROM pragma_table_info('counter_windows') WHERE name = "
                  "'comm_kernels_excluded'"),
            1);
  // Version 1's fill did not run again over the version 2 rollups.
  EXPECT_EQ(Query(path, "SELECT counted_kernels FROM module_stats WHERE sid = 1 AND path_id = 2"),
            41);
}

}  // namespace
}  // namespace flopscope::daemon
