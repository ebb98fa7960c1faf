#include "importer/trace_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "importer/import_command.h"
#include "importer/testing/temp_dir.h"

namespace flopscope::importer {
namespace {

using ::testing::HasSubstr;

class TraceReaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.File(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(TraceReaderTest, FormatComesFromTheContentNotTheName) {
  EXPECT_EQ(DetectTraceFormat(Write("a.sqlite", "  \n{\"traceEvents\": []}")).value(),
            TraceFormat::kKinetoJson);
  EXPECT_EQ(DetectTraceFormat(Write("b.json", std::string("SQLite format 3\0rest", 20))).value(),
            TraceFormat::kNsysSqlite);
  EXPECT_EQ(DetectTraceFormat(Write("c", "\x1f\x8b\x08")).value(), TraceFormat::kKinetoJson);
}

TEST_F(TraceReaderTest, OtherFilesAreRefusedByName) {
  const std::string path = Write("notes.txt", "hello");
  absl::StatusOr<TraceRecording> recording = ReadTrace(path, nullptr);
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(std::string(recording.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(recording.status().message()), HasSubstr("not a trace"));
  EXPECT_THAT(std::string(ReadTrace(Write("empty.json", ""), nullptr).status().message()),
              HasSubstr("empty"));
}

TEST_F(TraceReaderTest, ReaderErrorsArePrefixedWithThePath) {
  const std::string path = Write("bad.json", "{\"traceEvents\": [{]}");
  absl::StatusOr<TraceRecording> recording = ReadTrace(path, nullptr);
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(std::string(recording.status().message()), HasSubstr(path + ": offset 17"));
}

TEST(DefaultImportJobIdTest, NamedAfterTheFirstFile) {
  EXPECT_EQ(DefaultImportJobId("/data/rank-0.Apr_03.pt.trace.json.gz"), "import-rank-0.Apr_03");
  EXPECT_EQ(DefaultImportJobId("export.sqlite"), "import-export");
  EXPECT_EQ(DefaultImportJobId("we ird.json"), "import-we_ird");
}

}  // namespace
}  // namespace flopscope::importer
