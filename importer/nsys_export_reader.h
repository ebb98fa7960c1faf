#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/sqlite/sqlite_db.h"
#include "importer/trace_recording.h"

namespace flopscope::importer {

// Reads an Nsight Systems SQLite export (`nsys export --type sqlite`) into a TraceRecording:
//   CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET -> GpuActivity (names through StringIds)
//   CUPTI_ACTIVITY_KIND_RUNTIME                    -> LaunchSite by correlationId
//   NVTX_EVENTS push/pop and start/end ranges      -> ranges (domains from NvtxDomainCreate);
//                                                     `key=value` marks in domain flopscope
//   TARGET_INFO_GPU (older: TARGET_INFO_CUDA_GPU)  -> devices actually used
//   TARGET_INFO_SESSION_START_TIME.utcEpochNs      -> the base its timestamps count from
// Schemas differ across Nsight versions (StringIds or StringTable, with or without mangledName,
// textId, the session start table, the event-type enum), so columns are looked up, not assumed;
// event-type ids come from ENUM_NSYS_EVENT_TYPE when the export has it. Thread keys are the OS
// thread id (globalTid & 0xFFFFFF), the pid is (globalTid >> 24) & 0xFFFFFF.
//
// A file without the tables of an export is refused as "not an Nsight Systems export"; a row
// that makes no sense (NULL where a value is required, end before start) is an error naming its
// table and rowid.
class NsysExportReader {
 public:
  static absl::StatusOr<TraceRecording> Read(const std::string& path,
                                             const ProgressCallback& progress);

 private:
  NsysExportReader(SqliteDb* db, TraceRecording* recording, const ProgressCallback& progress)
      : db_(db), recording_(recording), progress_(progress) {}

  absl::Status LoadTableNames();
  bool HasTable(absl::string_view table) const { return tables_.contains(table); }
  // db_->ForEachRow, with SQL failures reported as bad input (InvalidArgument).
  absl::Status Rows(absl::string_view sql,
                    const std::function<absl::Status(const SqliteStatement&)>& on_row);
  absl::Status CheckIsExport() const;
  absl::Status ReadMetadata();
  absl::Status ReadStrings();
  absl::Status ReadDevices();
  absl::Status ReadKernels();
  absl::Status ReadMemoryOps(const std::string& table, v1::ActivityKind kind);
  absl::Status ReadLaunches();
  absl::Status ReadNvtx();
  absl::Status ReadNvtxDomains(const std::string& text_sql, int64_t domain_create_type);
  absl::StatusOr<int64_t> EventTypeId(const std::string& name, int64_t fallback);
  // The recording's id for an export string id (0 when unknown).
  uint32_t String(std::optional<int64_t> export_id) const;
  void CountRow();

  SqliteDb* db_;
  absl::flat_hash_set<std::string> tables_;  // tables and views of the export
  TraceRecording* recording_;
  const ProgressCallback& progress_;
  std::string string_table_;
  absl::flat_hash_map<int64_t, uint32_t> strings_;  // export string id -> StringPool id
  absl::flat_hash_map<int64_t, uint32_t> domains_;  // NVTX domainId -> StringPool id
  absl::flat_hash_map<int64_t, int> used_devices_;  // deviceId -> count
  uint64_t rows_total_ = 0;
};

}  // namespace flopscope::importer
