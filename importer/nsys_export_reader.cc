#include "importer/nsys_export_reader.h"

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "importer/byte_source.h"
#include "importer/range_role.h"
#include "importer/text_sanitizer.h"

namespace flopscope::importer {
namespace {

constexpr uint64_t kProgressEveryRows = 16384;

uint64_t ThreadOf(std::optional<int64_t> global_tid) {
  return global_tid.has_value() ? static_cast<uint64_t>(*global_tid) & 0xFFFFFF : 0;
}

int64_t PidOf(std::optional<int64_t> global_id) {
  return global_id.has_value() ? (*global_id >> 24) & 0xFFFFFF : 0;
}

uint32_t ToU32(std::optional<int64_t> value) {
  return value.has_value() && *value >= 0 && *value <= UINT32_MAX ? static_cast<uint32_t>(*value)
                                                                  : 0;
}

absl::Status RowError(absl::string_view table, std::optional<int64_t> rowid,
                      absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(table, " rowid ", rowid.value_or(-1), ": ", problem));
}

// The interval of a row, checked: both ends present and in order.
absl::Status ReadInterval(const SqliteStatement& row, absl::string_view table, int start_column,
                          int64_t* start, int64_t* end) {
  const std::optional<int64_t> s = row.ColumnOptionalInt(start_column);
  const std::optional<int64_t> e = row.ColumnOptionalInt(start_column + 1);
  if (!s.has_value() || !e.has_value()) {
    return RowError(table, row.ColumnOptionalInt(0), "start or end is NULL");
  }
  if (*e < *s) {
    return RowError(table, row.ColumnOptionalInt(0),
                    absl::StrCat("end ", *e, " is before start ", *s));
  }
  *start = *s;
  *end = *e;
  return absl::OkStatus();
}

// `column` when the table has it, else `fallback` (an SQL literal).
std::string Column(const absl::flat_hash_set<std::string>& columns, const std::string& column,
                   absl::string_view fallback = "NULL") {
  return columns.contains(column) ? absl::StrCat("\"", column, "\"") : std::string(fallback);
}

bool LaunchesKernel(absl::string_view api) {
  return absl::StrContains(api, "LaunchKernel") ||
         absl::StrContains(api, "LaunchCooperativeKernel") || absl::StartsWith(api, "cuLaunchGrid");
}

}  // namespace

absl::StatusOr<TraceRecording> NsysExportReader::Read(const std::string& path,
                                                      const ProgressCallback& progress) {
  TraceRecording recording;
  recording.path = path;
  recording.format = "nsys-sqlite";
  {
    // The digest of the file's bytes identifies this import (a re-import is then a no-op).
    absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path);
    if (!source.ok()) return source.status();
    std::vector<char> chunk(1 << 20);
    absl::StatusOr<size_t> got;
    while ((got = (*source)->Read(chunk.data(), chunk.size())).ok() && *got > 0) {
    }
    if (!got.ok()) return got.status();
    recording.content_digest = (*source)->digest();
    recording.bytes_read = (*source)->file_size();
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenReadOnly(path);
  if (!db.ok()) return db.status();
  NsysExportReader reader(db->get(), &recording, progress);
  absl::Status status = reader.LoadTableNames();
  if (status.ok()) status = reader.CheckIsExport();
  if (status.ok()) status = reader.ReadMetadata();
  if (status.ok()) status = reader.ReadStrings();
  if (status.ok()) status = reader.ReadKernels();
  if (status.ok())
    status = reader.ReadMemoryOps("CUPTI_ACTIVITY_KIND_MEMCPY", v1::ACTIVITY_KIND_MEMCPY);
  if (status.ok())
    status = reader.ReadMemoryOps("CUPTI_ACTIVITY_KIND_MEMSET", v1::ACTIVITY_KIND_MEMSET);
  if (status.ok()) status = reader.ReadLaunches();
  if (status.ok()) status = reader.ReadNvtx();
  if (status.ok()) status = reader.ReadDevices();
  if (!status.ok()) return status;
  return recording;
}

absl::Status NsysExportReader::LoadTableNames() {
  absl::StatusOr<absl::flat_hash_set<std::string>> tables = db_->TableNames();
  if (!tables.ok()) return absl::InvalidArgumentError(tables.status().message());
  tables_ = *std::move(tables);
  return absl::OkStatus();
}

absl::Status NsysExportReader::Rows(
    absl::string_view sql, const std::function<absl::Status(const SqliteStatement&)>& on_row) {
  absl::Status status = db_->ForEachRow(sql, on_row);
  // The file is someone else's: SQL that fails on it is a problem of the input, not of ours.
  if (absl::IsInternal(status)) return absl::InvalidArgumentError(status.message());
  return status;
}

absl::Status NsysExportReader::CheckIsExport() const {
  const bool has_strings = HasTable("StringIds") || HasTable("StringTable");
  const bool has_events = HasTable("CUPTI_ACTIVITY_KIND_KERNEL") ||
                          HasTable("CUPTI_ACTIVITY_KIND_RUNTIME") || HasTable("NVTX_EVENTS") ||
                          HasTable("META_DATA_EXPORT");
  if (has_strings && has_events) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "an SQLite database, but not an Nsight Systems export (it needs a StringIds table and "
      "CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables; create one with `nsys export --type sqlite`)");
}

absl::Status NsysExportReader::ReadMetadata() {
  if (HasTable("META_DATA_EXPORT")) {
    absl::Status s = Rows("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'",
                          [this](const SqliteStatement& row) {
                            recording_->format_version =
                                CleanText(row.ColumnText(0), kMaxNameBytes);
                            return absl::OkStatus();
                          });
    if (!s.ok()) return s;
  }
  if (HasTable("TARGET_INFO_SESSION_START_TIME")) {
    absl::Status s = Rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
                          [this](const SqliteStatement& row) {
                            if (std::optional<int64_t> start = row.ColumnOptionalInt(0)) {
                              recording_->base_time_ns = *start;
                              recording_->base_is_required = true;
                            }
                            return absl::OkStatus();
                          });
    if (!s.ok()) return s;
  }
  for (const char* table :
       {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"}) {
    if (!HasTable(table)) continue;
    absl::Status s =
        Rows(absl::StrCat("SELECT count(*) FROM ", table), [this](const SqliteStatement& row) {
          rows_total_ += static_cast<uint64_t>(row.ColumnOptionalInt(0).value_or(0));
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NsysExportReader::ReadStrings() {
  string_table_ = HasTable("StringIds") ? "StringIds" : "StringTable";
  return Rows(
      absl::StrCat("SELECT id, value FROM ", string_table_), [this](const SqliteStatement& row) {
        const std::optional<int64_t> id = row.ColumnOptionalInt(0);
        if (!id.has_value()) return absl::OkStatus();
        strings_[*id] = recording_->strings.Intern(CleanText(row.ColumnText(1), kMaxStringBytes));
        return absl::OkStatus();
      });
}

uint32_t NsysExportReader::String(std::optional<int64_t> export_id) const {
  if (!export_id.has_value()) return 0;
  const auto found = strings_.find(*export_id);
  return found == strings_.end() ? 0 : found->second;
}

// Progress is reported in bytes of the file, pro rata of the rows read, like the JSON reader's.
void NsysExportReader::CountRow() {
  if (++recording_->events_read % kProgressEveryRows != 0 || !progress_ || rows_total_ == 0) {
    return;
  }
  const double fraction =
      static_cast<double>(recording_->events_read) / static_cast<double>(rows_total_);
  progress_(static_cast<uint64_t>(fraction * static_cast<double>(recording_->bytes_read)),
            recording_->bytes_read);
}

absl::Status NsysExportReader::ReadKernels() {
  const std::string table = "CUPTI_ACTIVITY_KIND_KERNEL";
  if (!HasTable(table)) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db_->ColumnNames(table);
  if (!columns.ok()) return columns.status();
  // The mangled name, as the injector sends; older exports only have the demangled ones.
  std::vector<std::string> names;
  for (const char* name : {"mangledName", "demangledName", "shortName"}) {
    if (columns->contains(name)) names.push_back(name);
  }
  if (names.empty()) return absl::InvalidArgumentError(table + " has no kernel name column");
  const std::string sql =
      absl::StrCat("SELECT rowid, start, end, ", Column(*columns, "deviceId", "0"), ", ",
                   Column(*columns, "contextId", "0"), ", ", Column(*columns, "streamId", "0"),
                   ", ", Column(*columns, "correlationId", "0"), ", COALESCE(",
                   absl::StrJoin(names, ", "), "), ", Column(*columns, "gridX", "0"), ", ",
                   Column(*columns, "gridY", "0"), ", ", Column(*columns, "gridZ", "0"), ", ",
                   Column(*columns, "blockX", "0"), ", ", Column(*columns, "blockY", "0"), ", ",
                   Column(*columns, "blockZ", "0"), ", ", Column(*columns, "graphNodeId", "0"),
                   ", ", Column(*columns, "globalPid"), " FROM ", table, " ORDER BY start");
  return Rows(sql, [&](const SqliteStatement& row) {
    CountRow();
    GpuActivity kernel;
    kernel.kind = v1::ACTIVITY_KIND_KERNEL;
    if (absl::Status s = ReadInterval(row, table, 1, &kernel.start_ns, &kernel.end_ns); !s.ok())
      return s;
    kernel.device = ToU32(row.ColumnOptionalInt(3));
    kernel.context = ToU32(row.ColumnOptionalInt(4));
    kernel.stream = ToU32(row.ColumnOptionalInt(5));
    kernel.correlation_id = static_cast<uint64_t>(row.ColumnOptionalInt(6).value_or(0));
    kernel.name = String(row.ColumnOptionalInt(7));
    if (kernel.name == 0)
      return RowError(table, row.ColumnOptionalInt(0), "its kernel name is not in StringIds");
    for (int i = 0; i < 3; ++i) {
      kernel.grid[i] = ToU32(row.ColumnOptionalInt(8 + i));
      kernel.block[i] = ToU32(row.ColumnOptionalInt(11 + i));
    }
    kernel.graph_node_id = static_cast<uint64_t>(row.ColumnOptionalInt(14).value_or(0));
    if (recording_->pid == 0) recording_->pid = PidOf(row.ColumnOptionalInt(15));
    ++used_devices_[kernel.device];
    recording_->activities.push_back(kernel);
    return absl::OkStatus();
  });
}

absl::Status NsysExportReader::ReadMemoryOps(const std::string& table, v1::ActivityKind kind) {
  if (!HasTable(table)) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db_->ColumnNames(table);
  if (!columns.ok()) return columns.status();
  const std::string sql =
      absl::StrCat("SELECT rowid, start, end, ", Column(*columns, "deviceId", "0"), ", ",
                   Column(*columns, "contextId", "0"), ", ", Column(*columns, "streamId", "0"),
                   ", ", Column(*columns, "correlationId", "0"), ", ",
                   Column(*columns, "bytes", "0"), " FROM ", table, " ORDER BY start");
  return Rows(sql, [&](const SqliteStatement& row) {
    CountRow();
    GpuActivity op;
    op.kind = kind;
    if (absl::Status s = ReadInterval(row, table, 1, &op.start_ns, &op.end_ns); !s.ok()) return s;
    op.device = ToU32(row.ColumnOptionalInt(3));
    op.context = ToU32(row.ColumnOptionalInt(4));
    op.stream = ToU32(row.ColumnOptionalInt(5));
    op.correlation_id = static_cast<uint64_t>(row.ColumnOptionalInt(6).value_or(0));
    op.bytes = static_cast<uint64_t>(std::max<int64_t>(0, row.ColumnOptionalInt(7).value_or(0)));
    ++used_devices_[op.device];
    recording_->activities.push_back(op);
    return absl::OkStatus();
  });
}

absl::Status NsysExportReader::ReadLaunches() {
  const std::string table = "CUPTI_ACTIVITY_KIND_RUNTIME";
  if (!HasTable(table)) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db_->ColumnNames(table);
  if (!columns.ok()) return columns.status();
  const std::string sql =
      absl::StrCat("SELECT rowid, start, ", Column(*columns, "globalTid"), ", correlationId, ",
                   Column(*columns, "nameId"), " FROM ", table, " WHERE correlationId IS NOT NULL");
  return Rows(sql, [&](const SqliteStatement& row) {
    CountRow();
    const std::optional<int64_t> start = row.ColumnOptionalInt(1);
    if (!start.has_value()) return RowError(table, row.ColumnOptionalInt(0), "start is NULL");
    LaunchSite site;
    site.thread = ThreadOf(row.ColumnOptionalInt(2));
    site.time_ns = *start;
    site.launches_kernel =
        LaunchesKernel(recording_->strings.Get(String(row.ColumnOptionalInt(4))));
    if (recording_->pid == 0) recording_->pid = PidOf(row.ColumnOptionalInt(2));
    recording_->launches.insert_or_assign(static_cast<uint64_t>(*row.ColumnOptionalInt(3)), site);
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> NsysExportReader::EventTypeId(const std::string& name, int64_t fallback) {
  if (!HasTable("ENUM_NSYS_EVENT_TYPE")) return fallback;
  int64_t id = fallback;
  absl::Status s =
      Rows(absl::StrCat("SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name = '", name, "'"),
           [&id](const SqliteStatement& row) {
             id = row.ColumnOptionalInt(0).value_or(id);
             return absl::OkStatus();
           });
  if (!s.ok()) return s;
  return id;
}

absl::Status NsysExportReader::ReadNvtx() {
  const std::string table = "NVTX_EVENTS";
  if (!HasTable(table)) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db_->ColumnNames(table);
  if (!columns.ok()) return columns.status();
  absl::StatusOr<int64_t> mark = EventTypeId("NvtxMark", 34);
  absl::StatusOr<int64_t> push_pop = EventTypeId("NvtxPushPopRange", 59);
  absl::StatusOr<int64_t> start_end = EventTypeId("NvtxStartEndRange", 60);
  absl::StatusOr<int64_t> domain_create = EventTypeId("NvtxDomainCreate", 75);
  for (const auto* id : {&mark, &push_pop, &start_end, &domain_create}) {
    if (!id->ok()) return id->status();
  }
  // Newer exports keep long texts in StringIds (textId), older ones inline (text).
  const std::string text_sql =
      columns->contains("textId")
          ? absl::StrCat("COALESCE(", Column(*columns, "text"), ", (SELECT value FROM ",
                         string_table_, " WHERE id = textId))")
          : Column(*columns, "text");
  if (absl::Status s = ReadNvtxDomains(text_sql, *domain_create); !s.ok()) return s;
  const uint32_t flopscope_domain = recording_->strings.Intern(kFlopscopeDomain);
  const std::string sql = absl::StrCat(
      "SELECT rowid, start, end, eventType, ", text_sql, ", ", Column(*columns, "globalTid"), ", ",
      Column(*columns, "domainId", "0"), " FROM ", table, " WHERE eventType IN (", *mark, ", ",
      *push_pop, ", ", *start_end, ") ORDER BY start");
  return Rows(sql, [&](const SqliteStatement& row) {
    CountRow();
    const std::optional<int64_t> start = row.ColumnOptionalInt(1);
    if (!start.has_value()) return RowError(table, row.ColumnOptionalInt(0), "start is NULL");
    const auto domain = domains_.find(row.ColumnOptionalInt(6).value_or(0));
    const uint32_t domain_id = domain == domains_.end() ? 0 : domain->second;
    const absl::string_view text = row.ColumnText(4);
    if (row.ColumnOptionalInt(3) == *mark) {
      const size_t equals = text.find('=');
      if (domain_id == flopscope_domain && equals != absl::string_view::npos) {
        recording_->marks.push_back({CleanText(text.substr(0, equals), kMaxMetadataKeyBytes),
                                     CleanText(text.substr(equals + 1), kMaxMetadataValueBytes),
                                     *start});
      }
      return absl::OkStatus();
    }
    const std::optional<int64_t> end = row.ColumnOptionalInt(2);
    if (!end.has_value()) {
      ++recording_->unclosed_ranges;  // still open when the capture stopped
      return absl::OkStatus();
    }
    if (*end < *start) {
      return RowError(table, row.ColumnOptionalInt(0),
                      absl::StrCat("end ", *end, " is before start ", *start));
    }
    RawRange range;
    range.origin =
        row.ColumnOptionalInt(3) == *push_pop ? RangeOrigin::kAnnotation : RangeOrigin::kStartEnd;
    range.thread = ThreadOf(row.ColumnOptionalInt(5));
    range.start_ns = *start;
    range.end_ns = *end;
    range.domain = domain_id;
    range.name = recording_->strings.Intern(CleanText(text, kMaxNameBytes));
    if (range.name == 0) range.name = recording_->strings.Intern("<unnamed>");
    recording_->ranges.push_back(range);
    return absl::OkStatus();
  });
}

absl::Status NsysExportReader::ReadNvtxDomains(const std::string& text_sql,
                                               int64_t domain_create_type) {
  return Rows(absl::StrCat("SELECT domainId, ", text_sql,
                           " FROM NVTX_EVENTS WHERE eventType = ", domain_create_type),
              [this](const SqliteStatement& row) {
                if (std::optional<int64_t> id = row.ColumnOptionalInt(0)) {
                  domains_[*id] =
                      recording_->strings.Intern(CleanText(row.ColumnText(1), kMaxNameBytes));
                }
                return absl::OkStatus();
              });
}

absl::Status NsysExportReader::ReadDevices() {
  const std::string table =
      HasTable("TARGET_INFO_GPU") ? "TARGET_INFO_GPU" : "TARGET_INFO_CUDA_GPU";
  if (!HasTable(table)) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_set<std::string>> columns = db_->ColumnNames(table);
  if (!columns.ok()) return columns.status();
  const std::string sql = absl::StrCat(
      "SELECT ", Column(*columns, "id", "0"), ", ", Column(*columns, "name"), ", ",
      Column(*columns, "totalMemory", "0"), ", ", Column(*columns, "smCount", "0"), ", ",
      Column(*columns, "clockRate", "0"), ", ", Column(*columns, "computeMajor", "0"), ", ",
      Column(*columns, "computeMinor", "0"), ", ", Column(*columns, "uuid"), ", ",
      Column(*columns, "chipName"), " FROM ", table, " ORDER BY 1");
  return Rows(sql, [&](const SqliteStatement& row) {
    const uint32_t index = ToU32(row.ColumnOptionalInt(0));
    // A node's export lists every GPU; the rank is the process, so keep the ones it used.
    if (!used_devices_.empty() && !used_devices_.contains(index)) return absl::OkStatus();
    v1::Device device;
    device.set_index(index);
    device.set_name(CleanText(row.ColumnText(1), kMaxNameBytes));
    device.set_memory_bytes(
        static_cast<uint64_t>(std::max<int64_t>(0, row.ColumnOptionalInt(2).value_or(0))));
    device.set_sm_count(ToU32(row.ColumnOptionalInt(3)));
    device.set_sm_clock_khz(ToU32(row.ColumnOptionalInt(4).value_or(0) / 1000));  // stored in Hz
    device.set_compute_capability(
        ToU32(row.ColumnOptionalInt(5).value_or(0) * 10 + row.ColumnOptionalInt(6).value_or(0)));
    device.set_uuid(CleanText(row.ColumnText(7), kMaxNameBytes));
    device.set_chip(CleanText(row.ColumnText(8), kMaxNameBytes));
    recording_->devices.push_back(std::move(device));
    return absl::OkStatus();
  });
}

}  // namespace flopscope::importer
