// The two routes into the store, a live Collector stream and an orphaned spool file, are one
// ingest path (ingest_path.h): the same session's batches sent through each into a daemon of its
// own leave the same rows in the rank file and in the catalog, table by table, but for the
// daemon's own clock (first/last seen) and what only a stream is given (its resume token).

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/spool/spool_file.h"
#include "common/spool_dir.h"
#include "daemon/server/daemon_server.h"
#include "daemon/store/data_layout.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_daemon.h"
#include "daemon/testing/test_temp_dir.h"
#include "daemon/validate/parallel_mark.h"
#include "flopscope/v1/collector.grpc.pb.h"

namespace flopscope::daemon {
namespace {

constexpr char kJob[] = "routes";
constexpr int kRank = 3;
constexpr uint64_t kBatches = 4;

v1::SessionHello RouteHello() { return fixtures::Hello(kJob, kRank, "s-routes"); }

// The session's batches: paths, names, ranges, kernels, a metadata mark announcing the parallel
// layout (which only the stream route used to record in the catalog), and a final batch.
std::vector<v1::Batch> RouteBatches() {
  std::vector<v1::Batch> batches;
  for (uint64_t seq = 1; seq <= kBatches; ++seq) {
    v1::Batch batch;
    batch.set_seq(seq);
    if (seq == 1) {
      fixtures::AddString(batch, 1, "sgemm");
      fixtures::AddPath(batch, 1, 0, "model");
      fixtures::AddPath(batch, 2, 1, "model.layer");
      fixtures::AddMetadata(batch, kParallelKey, "tp=2 pp=1 dp=4 tp_rank=1 dp_rank=1");
    }
    for (int i = 0; i < 5; ++i) {
      const int64_t at = static_cast<int64_t>(seq) * 100'000 + i * 1000;
      fixtures::AddRange(batch, 2, at, 500);
      fixtures::AddKernel(batch, 2, 1, at + 10, 100);
    }
    batch.set_final(seq == kBatches);
    batches.push_back(batch);
  }
  return batches;
}

// A column's value as text; a blob in hex.
std::string ColumnText(sqlite3_stmt* row, int column) {
  switch (sqlite3_column_type(row, column)) {
    case SQLITE_NULL:
      return "NULL";
    case SQLITE_BLOB:
      return absl::BytesToHexString(
          absl::string_view(static_cast<const char*>(sqlite3_column_blob(row, column)),
                            static_cast<size_t>(sqlite3_column_bytes(row, column))));
    default:
      return reinterpret_cast<const char*>(sqlite3_column_text(row, column));
  }
}

// Every table of an SQLite file as sorted rows of "column=value" text, without `skipped` columns
// and `skipped_tables`.
using TableRows = std::map<std::string, std::multiset<std::string>>;
TableRows DumpFile(const std::string& path, const std::set<std::string>& skipped_columns,
                   const std::set<std::string>& skipped_tables) {
  TableRows tables;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << path;
  sqlite3_stmt* names = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                     "'sqlite_%' ORDER BY name",
                     -1, &names, nullptr);
  std::vector<std::string> table_names;
  while (sqlite3_step(names) == SQLITE_ROW) {
    table_names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(names, 0)));
  }
  sqlite3_finalize(names);
  for (const std::string& table : table_names) {
    if (skipped_tables.count(table) > 0) continue;
    sqlite3_stmt* rows = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, absl::StrCat("SELECT * FROM \"", table, "\"").c_str(), -1,
                                 &rows, nullptr),
              SQLITE_OK);
    std::multiset<std::string>& out = tables[table];
    while (sqlite3_step(rows) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(rows); ++c) {
        const std::string column = sqlite3_column_name(rows, c);
        if (skipped_columns.count(column) > 0) continue;
        absl::StrAppend(&row, column, "=", ColumnText(rows, c), " ");
      }
      out.insert(row);
    }
    sqlite3_finalize(rows);
  }
  sqlite3_close(db);
  return tables;
}

// The daemon's own clock, not the data's.
const std::set<std::string> kClockColumns = {"first_seen_ns", "last_seen_ns"};

class IngestRoutesTest : public ::testing::Test {
 protected:
  // A daemon of its own per route, in its own directory.
  std::unique_ptr<DaemonServer> StartDaemon(const std::string& name,
                                            std::vector<std::string> spool_patterns) {
    DaemonOptions options = fixtures::TestDaemonOptions(dir_, name, name + ".sock");
    options.spool_patterns = std::move(spool_patterns);
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // Route 1: a producer's live stream.
  void SendOverAStream(DaemonServer& daemon) {
    auto channel = grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials());
    auto stub = v1::Collector::NewStub(channel);
    grpc::ClientContext context;
    auto stream = stub->Stream(&context);
    v1::UpMessage message;
    *message.mutable_hello() = RouteHello();
    ASSERT_TRUE(stream->Write(message));
    v1::DownMessage reply;
    ASSERT_TRUE(stream->Read(&reply) && reply.has_welcome());
    for (const v1::Batch& batch : batches_) {
      *message.mutable_batch() = batch;
      ASSERT_TRUE(stream->Write(message));
      ASSERT_TRUE(stream->Read(&reply) && reply.has_ack());
      EXPECT_EQ(reply.ack().committed_seq(), batch.seq());
    }
    stream->WritesDone();
    const grpc::Status finished = stream->Finish();
    ASSERT_TRUE(finished.ok()) << finished.error_message();
  }

  // Route 2: the same session's spool file, left by a process that ended before delivering it,
  // in the folder of `spool_dir` for the daemon at `socket`; returns that folder.
  std::string LeaveASpool(const std::string& spool_dir, const std::string& socket) {
    std::string error;
    const std::string folder = spool_dir + "/" + SpoolDestinationName(socket);
    EXPECT_TRUE(SpoolFile::PrepareDirectory(spool_dir, &error)) << error;
    EXPECT_TRUE(SpoolFile::PrepareDirectory(folder, &error)) << error;
    v1::UpMessage hello;
    *hello.mutable_hello() = RouteHello();
    std::unique_ptr<SpoolFile> file = SpoolFile::Create(folder, hello, 1 << 30, &error);
    EXPECT_NE(file, nullptr) << error;
    if (file == nullptr) return folder;
    for (const v1::Batch& batch : batches_) {
      v1::UpMessage up;
      *up.mutable_batch() = batch;
      SpoolFile::Entry entry;
      EXPECT_TRUE(file->Append(batch.seq(), up, ProducerRecordCount(batch), &entry));
    }
    return folder;
  }

  static bool WaitUntilGone(const std::string& spool_dir) {
    for (int i = 0; i < 200; ++i) {
      if (SpoolFile::List(spool_dir).empty()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  fixtures::ScopedTempDir dir_;
  // Built once: the builders number range instances and correlation ids as they go.
  const std::vector<v1::Batch> batches_ = RouteBatches();
};

TEST_F(IngestRoutesTest, AStreamAndASpoolLeaveTheSameRowsInTheStoreAndTheCatalog) {
  std::unique_ptr<DaemonServer> streamed = StartDaemon("streamed", {});
  ASSERT_NE(streamed, nullptr);
  SendOverAStream(*streamed);
  streamed->Shutdown();

  const std::string spool_dir = dir_.File("spool");
  const std::string folder = LeaveASpool(spool_dir, dir_.File("spooled.sock"));
  // The collector's first pass runs as the daemon starts.
  std::unique_ptr<DaemonServer> spooled = StartDaemon("spooled", {spool_dir});
  ASSERT_NE(spooled, nullptr);
  ASSERT_TRUE(WaitUntilGone(folder)) << "the spool was never delivered";
  spooled->Shutdown();

  const std::string rank_file = absl::StrCat("/jobs/", kJob, "/rank-0000", kRank, ".sqlite");
  const TableRows stream_rank = DumpFile(dir_.File("streamed") + rank_file, kClockColumns, {});
  const TableRows spool_rank = DumpFile(dir_.File("spooled") + rank_file, kClockColumns, {});
  ASSERT_FALSE(stream_rank.empty());
  EXPECT_GT(stream_rank.at("kernels").size(), 0u);
  for (const auto& [table, rows] : stream_rank) {
    EXPECT_EQ(spool_rank.at(table), rows) << "rank file table " << table;
  }
  EXPECT_EQ(spool_rank.size(), stream_rank.size());

  // A stream is given a resume token; a spool's process is gone and needs none.
  const std::set<std::string> access_only = {"session_tokens"};
  const TableRows stream_catalog =
      DumpFile(CatalogPath(dir_.File("streamed")), kClockColumns, access_only);
  const TableRows spool_catalog =
      DumpFile(CatalogPath(dir_.File("spooled")), kClockColumns, access_only);
  ASSERT_EQ(stream_catalog.at("ranks").size(), 1u);
  EXPECT_THAT(*stream_catalog.at("ranks").begin(),
              ::testing::Not(::testing::HasSubstr("announced_layout=NULL")))
      << "the parallel mark's layout is in the catalog";
  for (const auto& [table, rows] : stream_catalog) {
    EXPECT_EQ(spool_catalog.at(table), rows) << "catalog table " << table;
  }
  EXPECT_EQ(spool_catalog.size(), stream_catalog.size());
}

}  // namespace
}  // namespace flopscope::daemon
