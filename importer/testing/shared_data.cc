#include "importer/testing/shared_data.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>

namespace flopscope::importer::testing {

std::string SharedDataFile(const std::string& relative) {
  const char* dir = std::getenv("FLOPSCOPE_SHARED_DATA_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  const std::string path = std::string(dir) + "/" + relative;
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? path : "";
}

std::string SkipMessage(const std::string& relative) {
  const char* dir = std::getenv("FLOPSCOPE_SHARED_DATA_DIR");
  return "shared fixture " + relative +
         " not found (FLOPSCOPE_SHARED_DATA_DIR=" + (dir != nullptr ? dir : "<unset>") +
         "): skipping";
}

std::string ReadWholeFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files unchanged too
  std::string data;
  if (file == nullptr) return data;
  char chunk[1 << 16];
  int got = 0;
  while ((got = gzread(file, chunk, sizeof chunk)) > 0) data.append(chunk, got);
  gzclose(file);
  return data;
}

int64_t QuerySqliteInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* statement = nullptr;
  int64_t value = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
      sqlite3_step(statement) == SQLITE_ROW) {
    value = sqlite3_column_int64(statement, 0);
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

WholeTrace::WholeTrace(const std::string& path) : json_(ReadWholeFile(path)) {
  ok_ = json_.size() > 0 && parser_.parse(json_).get(root_) == simdjson::SUCCESS;
}

simdjson::dom::array WholeTrace::events() const {
  simdjson::dom::array events;
  if (root_["traceEvents"].get_array().get(events) != simdjson::SUCCESS) return {};
  return events;
}

}  // namespace flopscope::importer::testing
