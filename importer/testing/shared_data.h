#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>

namespace flopscope::importer::testing {

// Path of a file under ../shared/data (FLOPSCOPE_SHARED_DATA_DIR), or "" when the directory or
// the file is absent; tests then GTEST_SKIP() with SkipMessage().
std::string SharedDataFile(const std::string& relative);
std::string SkipMessage(const std::string& relative);

// The whole trace decompressed (gzip or plain), read with zlib's gzread: a code path apart from
// the importer's streaming reader, so expected values computed from it are independent.
std::string ReadWholeFile(const std::string& path);

// The first column of the first row of `sql` run read-only on the SQLite file at `path`, or -1.
// Lets tests take expected values straight from an Nsight export's own tables.
int64_t QuerySqliteInt(const std::string& path, const std::string& sql);

// The whole document parsed at once by simdjson's DOM (the importer parses event by event).
class WholeTrace {
 public:
  explicit WholeTrace(const std::string& path);
  bool ok() const { return ok_; }
  simdjson::dom::element root() const { return root_; }
  simdjson::dom::array events() const;

 private:
  simdjson::dom::parser parser_;
  simdjson::padded_string json_;
  simdjson::dom::element root_;
  bool ok_ = false;
};

}  // namespace flopscope::importer::testing

#define SKIP_WITHOUT_SHARED_DATA(path, relative)                                     \
  const std::string path = ::flopscope::importer::testing::SharedDataFile(relative); \
  if (path.empty()) GTEST_SKIP() << ::flopscope::importer::testing::SkipMessage(relative)
