// `RunImport` against a real daemon (DaemonServer in-process, on a temporary socket and data
// dir), then read back through the daemon's own Query service. Expected values are computed
// from the raw files with testing::TraceFacts, never typed in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "daemon/server/daemon_server.h"
#include "importer/import_command.h"
#include "importer/testing/shared_data.h"
#include "importer/testing/temp_dir.h"
#include "importer/testing/trace_facts.h"

namespace flopscope::importer {
namespace {

using ::flopscope::importer::testing::TempDir;
using ::flopscope::importer::testing::TraceFacts;
using ::testing::HasSubstr;

constexpr char kSampled0[] = "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz";
constexpr char kSampled1[] = "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz";
constexpr char kCounters[] =
    "HolisticTraceAnalysis/tests/data/cupti_profiler/"
    "benchmark_result_924719_1679055439_trace.json.gz";
constexpr char kQwen[] = "TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz";
constexpr char kNsys[] = "pipit/pipit/tests/data/cloverleaf-nsys/perlmutter-cloverleaf-cuda.sqlite";

class ImportE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon::DaemonOptions options;
    options.data_dir = dir_.File("data");
    options.socket_path = dir_.File("fs.sock");
    options.log_level = daemon::LogLevel::kWarning;
    absl::StatusOr<std::unique_ptr<daemon::DaemonServer>> server =
        daemon::DaemonServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  absl::Status Import(std::vector<std::string> files, const std::string& job,
                      std::string* out = nullptr) {
    ImportOptions options;
    options.files = std::move(files);
    options.job = job;
    options.socket = server_->options().socket_path;
    options.progress = false;
    std::ostringstream lines;
    absl::Status status = RunImport(options, lines);
    if (out != nullptr) *out = lines.str();
    return status;
  }

  absl::StatusOr<v1::Report> Report(const std::string& job) {
    v1::ReportRequest request;
    request.set_job_id(job);
    return server_->query_service().BuildReport(request);
  }

  bool JobExists(const std::string& job) { return Report(job).ok(); }

  // Sum over the top-level rows: each activity counted once.
  static uint64_t TotalActivities(const v1::Report& report) {
    uint64_t total = 0;
    for (const v1::ModuleStats& module : report.modules()) {
      // Kernels, memcpys and memsets: the report counts them apart.
      if (module.depth() == 0) {
        total += module.kernels() + module.memcpy_count() + module.memset_count();
      }
    }
    return total;
  }

  TempDir dir_;
  std::unique_ptr<daemon::DaemonServer> server_;
};

TEST_F(ImportE2eTest, TwoRankFilesBecomeOneJobWithTwoRanks) {
  SKIP_WITHOUT_SHARED_DATA(rank0, kSampled0);
  SKIP_WITHOUT_SHARED_DATA(rank1, kSampled1);
  std::string out;
  ASSERT_TRUE(Import({rank0, rank1}, "tworank", &out).ok());
  EXPECT_THAT(out, HasSubstr(rank0 + ": job tworank rank 0"));
  EXPECT_THAT(out, HasSubstr(rank1 + ": job tworank rank 1"));
  absl::StatusOr<v1::Report> report = Report("tworank");
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->ranks_size(), 2);
  uint64_t expected_activities = 0;
  for (int i = 0; i < 2; ++i) {
    const TraceFacts facts(i == 0 ? rank0 : rank1);
    ASSERT_TRUE(facts.ok());
    EXPECT_EQ(report->ranks(i).rank(), facts.DistributedInt("rank"));
    EXPECT_EQ(report->ranks(i).world_size(), facts.DistributedInt("world_size"));
    expected_activities += facts.CountCategory({"kernel", "gpu_memcpy", "gpu_memset"});
  }
  EXPECT_EQ(TotalActivities(*report), expected_activities);
  // Steps and phases reach the report as phases.
  bool has_step = false;
  for (const v1::PhaseStats& phase : report->phases()) has_step |= phase.name() == "step";
  EXPECT_TRUE(has_step);
}

TEST_F(ImportE2eTest, CounterFixtureFlopsReachTheReport) {
  SKIP_WITHOUT_SHARED_DATA(path, kCounters);
  ASSERT_TRUE(Import({path}, "counters").ok());
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  double expected = 0;
  for (const TraceFacts::Event& event : facts.events()) {
    if (event.cat != "cuda_profiler_range") continue;
    const auto c = [&event](const char* op) {
      return event.args.at(std::string("smsp__sass_thread_inst_executed_op_") + op +
                           "_pred_on.sum");
    };
    expected += c("dadd") + c("dmul") + 2 * c("dfma") + c("fadd") + c("fmul") + 2 * c("ffma") +
                2 * c("hadd") + 2 * c("hmul") + 4 * c("hfma");
  }
  absl::StatusOr<v1::Report> report = Report("counters");
  ASSERT_TRUE(report.ok()) << report.status();
  double reported = 0;
  for (const v1::ModuleStats& module : report->modules()) {
    if (module.depth() == 0 && module.has_flops()) reported += module.flops();
  }
  EXPECT_DOUBLE_EQ(reported, expected);
  bool has_convention = false;
  for (const v1::Metadata& entry : report->metadata()) {
    has_convention |= entry.key() == "import.fp16_convention";
  }
  EXPECT_TRUE(has_convention);
}

TEST_F(ImportE2eTest, ImportingTheSameFileAgainStoresNothingTwice) {
  SKIP_WITHOUT_SHARED_DATA(path, kQwen);
  ASSERT_TRUE(Import({path}, "again").ok());
  absl::StatusOr<v1::Report> first = Report("again");
  ASSERT_TRUE(first.ok());
  std::string out;
  ASSERT_TRUE(Import({path}, "again", &out).ok());
  EXPECT_THAT(out, HasSubstr("already imported"));
  absl::StatusOr<v1::Report> second = Report("again");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ranks(0).kernels(), first->ranks(0).kernels());
  EXPECT_EQ(second->ranks(0).range_events(), first->ranks(0).range_events());
  EXPECT_EQ(second->ranks(0).sessions(), 1u);
}

TEST_F(ImportE2eTest, NsightExportImports) {
  SKIP_WITHOUT_SHARED_DATA(path, kNsys);
  ASSERT_TRUE(Import({path}, "nsys").ok());
  absl::StatusOr<v1::Report> report = Report("nsys");
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->ranks_size(), 1);
  EXPECT_EQ(report->ranks(0).devices_size(),
            testing::QuerySqliteInt(
                path, "SELECT count(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(static_cast<int64_t>(TotalActivities(*report)),
            testing::QuerySqliteInt(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") +
                testing::QuerySqliteInt(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
}

// A good file next to a bad one: the bad one is named, and nothing of either is stored.
class MalformedInputTest : public ImportE2eTest {
 protected:
  void ExpectRefused(const std::string& bad_file, const std::string& problem) {
    SKIP_WITHOUT_SHARED_DATA(good, kSampled0);
    const absl::Status status = Import({good, bad_file}, "bad");
    EXPECT_FALSE(status.ok());
    EXPECT_THAT(status.message(), HasSubstr(bad_file));
    EXPECT_THAT(status.message(), HasSubstr(problem));
    EXPECT_FALSE(JobExists("bad")) << "nothing may be stored";
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.File(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
};

TEST_F(MalformedInputTest, TruncatedGzip) {
  SKIP_WITHOUT_SHARED_DATA(path, kSampled1);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  ExpectRefused(Write("cut.json.gz", bytes), "truncated");
}

TEST_F(MalformedInputTest, InvalidJson) {
  ExpectRefused(Write("broken.json",
                      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1,},]}"),
                "offset 17");
}

TEST_F(MalformedInputTest, SqliteFileThatIsNotAnExport) {
  const std::string path = dir_.File("other.sqlite");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  ExpectRefused(path, "not an Nsight Systems export");
}

TEST_F(ImportE2eTest, NoDaemonIsAClearError) {
  SKIP_WITHOUT_SHARED_DATA(path, kSampled0);
  ImportOptions options;
  options.files = {path};
  options.socket = dir_.File("nobody.sock");
  options.progress = false;
  std::ostringstream out;
  const absl::Status status = RunImport(options, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("flopscoped"));
}

}  // namespace
}  // namespace flopscope::importer
