#include "importer/nsys_export_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "importer/import_assembler.h"
#include "importer/testing/shared_data.h"
#include "importer/testing/temp_dir.h"

namespace flopscope::importer {
namespace {

using ::flopscope::importer::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kCloverleaf[] =
    "pipit/pipit/tests/data/cloverleaf-nsys/perlmutter-cloverleaf-cuda.sqlite";
constexpr int64_t kPid = 4242;
constexpr int64_t kTid = 4250;
constexpr int64_t kGlobalTid = (kPid << 24) | kTid;

void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error != nullptr ? error : "") << "\n"
      << sql;
}

// A small export in the current schema: enum-table event types (deliberately not the usual
// numbers), textId, domains, mangled names, a session start.
void WriteCurrentSchema(sqlite3* db) {
  Exec(db, R"sql(
    CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO StringIds VALUES (1, '_Z4kernv'), (2, 'kern()'), (3, 'cudaLaunchKernel_v7000'),
      (4, 'layer'), (5, 'flopscope'), (6, 'forward'), (7, 'cudaMemcpyAsync_v3020');
    CREATE TABLE ENUM_NSYS_EVENT_TYPE(id INTEGER PRIMARY KEY, name TEXT, label TEXT);
    INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (134, 'NvtxMark', ''), (159, 'NvtxPushPopRange', ''),
      (160, 'NvtxStartEndRange', ''), (175, 'NvtxDomainCreate', '');
    CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
    INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2');
    CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
    INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');
    CREATE TABLE TARGET_INFO_GPU(id INTEGER NOT NULL, name TEXT, totalMemory INTEGER,
      smCount INTEGER, clockRate INTEGER, computeMajor INTEGER, computeMinor INTEGER, uuid TEXT,
      chipName TEXT);
    INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100', 80000000000, 132, 1980000000, 9, 0,
      'GPU-1', 'GH100'), (1, 'NVIDIA H100', 80000000000, 132, 1980000000, 9, 0, 'GPU-2', 'GH100');
    CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
      rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
      endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,
      eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
      returnValue INTEGER NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,
      deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
      correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
      shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER NOT NULL,
      gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
      blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,
      deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
      correlationId INTEGER, bytes INTEGER NOT NULL);
  )sql");
  const std::string tid = absl::StrCat(kGlobalTid);
  Exec(db,
       absl::StrCat(
           "INSERT INTO NVTX_EVENTS VALUES (0, NULL, 175, NULL, NULL, NULL, NULL, ", tid,
           ", NULL, 5, 3);",
           "INSERT INTO NVTX_EVENTS VALUES (50, 2000, 159, NULL, NULL, NULL, NULL, ", tid,
           ", NULL, 6, 3);",
           "INSERT INTO NVTX_EVENTS VALUES (100, 1000, 159, NULL, NULL, NULL, NULL, ", tid,
           ", NULL, 4, 0);",
           "INSERT INTO NVTX_EVENTS VALUES (120, NULL, 159, NULL, NULL, NULL, 'open', ", tid,
           ", NULL, NULL, 0);",
           "INSERT INTO NVTX_EVENTS VALUES (130, 130, 134, NULL, NULL, NULL, 'batch_size=8', ", tid,
           ", NULL, NULL, 3);", "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (500, 510, 0, ",
           tid, ", 7, 3, 0), (1200, 1210, 0, ", tid, ", 8, 3, 0), (1300, 1310, 0, ", tid,
           ", 9, 7, 0);", "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1500, 1600, 0, 1, 7, 7, ",
           kPid << 24, ", 2, 2, 1, 4, 1, 1, 128, 1, 1), (1700, 1900, 0, 1, 7, 8, ", kPid << 24,
           ", 2, 2, 1, 4, 1, 1, 128, 1, 1);",
           "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1400, 1450, 0, 1, 7, 9, 4096);"));
}

// An older export: no enum table (the classic event-type numbers), inline NVTX text, no
// mangled names, no session start.
void WriteOlderSchema(sqlite3* db) {
  Exec(db, R"sql(
    CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO StringIds VALUES (1, 'kern()'), (2, 'kern'), (3, 'cudaLaunchKernel_v7000');
    CREATE TABLE NVTX_EVENTS(start INT NOT NULL, end INT NOT NULL, eventType INT NOT NULL,
      rangeId INT NOT NULL, category INT NOT NULL, color INT NOT NULL, text TEXT,
      globalTid INT NOT NULL, endGlobalTid INT NOT NULL, domainId INT NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INT NOT NULL, end INT NOT NULL,
      globalTid INT NOT NULL, correlationId INT NOT NULL, nameId INT NOT NULL,
      returnValue INT NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INT NOT NULL, end INT NOT NULL,
      deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL,
      correlationId INT NOT NULL, globalPid INT NOT NULL, demangledName INT NOT NULL,
      shortName INT NOT NULL, gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL,
      blockX INT NOT NULL, blockY INT NOT NULL, blockZ INT NOT NULL);
  )sql");
  const std::string tid = absl::StrCat(kGlobalTid);
  Exec(db,
       absl::StrCat(
           "INSERT INTO NVTX_EVENTS VALUES (100, 1000, 59, 0, 0, 0, 'ProfilerStep#3', ", tid, ", ",
           tid, ", 0);", "INSERT INTO NVTX_EVENTS VALUES (110, 900, 59, 0, 0, 0, 'model', ", tid,
           ", ", tid, ", 0);", "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (200, 210, ", tid,
           ", 5, 3, 0);", "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (300, 400, 0, 1, 7, 5, ",
           kPid << 24, ", 1, 2, 1, 1, 1, 32, 1, 1);"));
}

class NsysExportReaderTest : public ::testing::Test {
 protected:
  std::string Create(void (*write)(sqlite3*)) {
    const std::string path = dir_.File("export.sqlite");
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    write(db);
    sqlite3_close(db);
    return path;
  }

  static ImportPlan Assemble(TraceRecording recording) {
    absl::StatusOr<ImportPlan> plan =
        ImportAssembler::Assemble(std::move(recording), {"job", 0, absl::Now()});
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *std::move(plan) : ImportPlan();
  }

  static std::map<std::string, std::string> PathsByName(const ImportPlan& plan) {
    std::map<std::string, std::string> domains;
    for (const v1::RangePath& path : plan.paths) domains[path.name()] = path.domain();
    return domains;
  }

  TempDir dir_;
};

TEST_F(NsysExportReaderTest, CurrentSchema) {
  absl::StatusOr<TraceRecording> recording =
      NsysExportReader::Read(Create(WriteCurrentSchema), nullptr);
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_EQ(recording->format_version, "3.13.2");
  EXPECT_EQ(recording->pid, kPid);
  EXPECT_EQ(recording->unclosed_ranges, 1u);
  ASSERT_EQ(recording->devices.size(), 1u) << "only the GPU the kernels ran on";
  EXPECT_EQ(recording->devices[0].chip(), "GH100");
  EXPECT_EQ(recording->devices[0].sm_clock_khz(), 1980000u);
  ASSERT_EQ(recording->marks.size(), 1u);
  EXPECT_EQ(recording->marks[0].key, "batch_size");
  const ImportPlan plan = Assemble(*std::move(recording));
  EXPECT_EQ(plan.time_offset_ns, 1700000000000000000);
  EXPECT_EQ(PathsByName(plan),
            (std::map<std::string, std::string>{{"layer", ""}, {"forward", "flopscope"}}));
  ASSERT_EQ(plan.recording.activities.size(), 3u);
  // Kernel 1 launched inside "layer"; kernel 2 launched after it closed.
  EXPECT_EQ(plan.counts.kernels, 2u);
  EXPECT_EQ(plan.counts.attributed_kernels, 1u);
  EXPECT_EQ(plan.counts.memcpys, 1u);
  EXPECT_EQ(plan.recording.strings.Get(plan.recording.activities[0].name), "_Z4kernv");
  ASSERT_EQ(plan.losses.size(), 1u);
  EXPECT_EQ(plan.losses[0].cause(), v1::LOSS_CAUSE_UNCLOSED_RANGE);
}

TEST_F(NsysExportReaderTest, OlderSchema) {
  absl::StatusOr<TraceRecording> recording =
      NsysExportReader::Read(Create(WriteOlderSchema), nullptr);
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_FALSE(recording->base_time_ns.has_value());
  const ImportPlan plan = Assemble(*std::move(recording));
  EXPECT_EQ(PathsByName(plan),
            (std::map<std::string, std::string>{{"step", "flopscope"}, {"model", ""}}));
  EXPECT_EQ(plan.counts.attributed_kernels, 1u);
  EXPECT_EQ(plan.recording.strings.Get(plan.recording.activities[0].name), "kern()");
}

TEST_F(NsysExportReaderTest, RowThatMakesNoSenseIsNamed) {
  const std::string path = Create(WriteOlderSchema);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  Exec(db,
       "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (900, 800, 0, 1, 7, 6, 0, 1, 2, 1, 1, "
       "1, 32, 1, 1)");
  sqlite3_close(db);
  absl::StatusOr<TraceRecording> recording = NsysExportReader::Read(path, nullptr);
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("CUPTI_ACTIVITY_KIND_KERNEL rowid 2"));
  EXPECT_THAT(recording.status().message(), HasSubstr("before start"));
}

TEST_F(NsysExportReaderTest, SqliteThatIsNotAnExportIsRefused) {
  const std::string path = Create([](sqlite3* db) { Exec(db, "CREATE TABLE notes(x)"); });
  absl::StatusOr<TraceRecording> recording = NsysExportReader::Read(path, nullptr);
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("not an Nsight Systems export"));
}

TEST(NsysFixtureTest, CloverleafMatchesItsTables) {
  SKIP_WITHOUT_SHARED_DATA(path, kCloverleaf);
  absl::StatusOr<TraceRecording> recording = NsysExportReader::Read(path, nullptr);
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_EQ(recording->base_time_ns,
            testing::QuerySqliteInt(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"));
  absl::StatusOr<ImportPlan> plan =
      ImportAssembler::Assemble(*std::move(recording), {"job", 0, absl::Now()});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(static_cast<int64_t>(plan->counts.kernels),
            testing::QuerySqliteInt(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(static_cast<int64_t>(plan->counts.memcpys),
            testing::QuerySqliteInt(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
  int64_t kernel_ns = 0;
  for (const GpuActivity& activity : plan->recording.activities) {
    if (activity.kind == v1::ACTIVITY_KIND_KERNEL) kernel_ns += activity.end_ns - activity.start_ns;
  }
  EXPECT_EQ(kernel_ns, testing::QuerySqliteInt(
                           path, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(static_cast<int64_t>(plan->counts.kernels - plan->counts.kernels_without_launch),
            testing::QuerySqliteInt(
                path,
                "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
                "CUPTI_ACTIVITY_KIND_RUNTIME r ON k.correlationId = r.correlationId"));
  EXPECT_EQ(static_cast<int64_t>(plan->hello.devices_size()),
            testing::QuerySqliteInt(
                path, "SELECT count(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(
      plan->hello.pid(),
      testing::QuerySqliteInt(path,
                              "SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL "
                              "LIMIT 1"));
}

}  // namespace
}  // namespace flopscope::importer
