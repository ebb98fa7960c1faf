// Reads one rank file's raw records for Query.GetTrace (see trace_reader.h).
#include "daemon/query/trace_reader.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/nvtx_vocabulary.h"
#include "daemon/query/rank_reader.h"
#include "daemon/report/report_builder.h"

namespace flopscope::daemon {
namespace {

using Statement = std::unique_ptr<SqliteStatement>;
using FlopsByCorrelation = absl::flat_hash_map<uint64_t, v1::FlopCounters>;

// Fills the chunks of one session and sends each once it is full.
class ChunkSender {
 public:
  ChunkSender(int32_t rank, int64_t sid, const std::function<bool(v1::TraceChunk)>& emit)
      : rank_(rank), sid_(sid), emit_(emit) {
    Reset();
  }

  v1::TraceChunk& chunk() { return chunk_; }
  bool stopped() const { return stopped_; }

  // Call after adding one record of about `bytes`: sends the chunk when it is full.
  void Added(size_t bytes) {
    ++records_;
    bytes_ += bytes;
    if (records_ >= kTraceChunkRecords || bytes_ >= kTraceChunkBytes) Flush();
  }

  // Sends what the chunk holds (the first chunk of a session always goes: it names the session).
  void Flush() {
    if (stopped_ || (records_ == 0 && sent_any_)) return;
    stopped_ = !emit_(std::move(chunk_));
    sent_any_ = true;
    Reset();
  }

 private:
  void Reset() {
    chunk_ = v1::TraceChunk();
    chunk_.set_rank(rank_);
    chunk_.set_session_index(sid_);
    records_ = 0;
    bytes_ = 0;
  }

  const int32_t rank_;
  const int64_t sid_;
  const std::function<bool(v1::TraceChunk)>& emit_;
  v1::TraceChunk chunk_;
  size_t records_ = 0;
  size_t bytes_ = 0;
  bool sent_any_ = false;
  bool stopped_ = false;
};

absl::StatusOr<Statement> PrepareForSession(SqliteDb& db, const char* sql, int64_t sid,
                                            const TraceWindow* window = nullptr) {
  absl::StatusOr<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, sid);
  if (window != nullptr) {
    (*stmt)->BindInt(2, window->first_ns);
    (*stmt)->BindInt(3, window->last_ns);
  }
  return stmt;
}

// Runs `stmt` to its end, handing each row to `on_row`.
template <typename OnRow>
absl::Status EachRow(SqliteStatement& stmt, OnRow on_row) {
  while (true) {
    absl::StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    on_row(stmt);
  }
}

absl::Status SendDefinitions(SqliteDb& db, int64_t sid, ChunkSender& sender) {
  absl::StatusOr<Statement> paths = PrepareForSession(
      db, "SELECT id, parent_id, domain, name FROM range_paths WHERE sid = ?1 ORDER BY id", sid);
  if (!paths.ok()) return paths.status();
  absl::Status status = EachRow(**paths, [&](SqliteStatement& row) {
    v1::RangePath& path = *sender.chunk().add_paths();
    path.set_id(row.ColumnUint(0));
    path.set_parent_id(row.ColumnUint(1));
    path.set_domain(row.ColumnString(2));
    path.set_name(row.ColumnString(3));
    sender.Added(path.ByteSizeLong());
  });
  if (!status.ok()) return status;
  absl::StatusOr<Statement> strings =
      PrepareForSession(db, "SELECT id, value FROM strings WHERE sid = ?1 ORDER BY id", sid);
  if (!strings.ok()) return strings.status();
  return EachRow(**strings, [&](SqliteStatement& row) {
    v1::StringDef& def = *sender.chunk().add_strings();
    def.set_id(static_cast<uint32_t>(row.ColumnUint(0)));
    def.set_value(row.ColumnString(1));
    sender.Added(def.ByteSizeLong());
  });
}

// Counted FLOPs of the session's kernels (only kernels of counter windows have any).
absl::StatusOr<FlopsByCorrelation> ReadFlops(SqliteDb& db, int64_t sid) {
  FlopsByCorrelation flops;
  absl::StatusOr<Statement> stmt = PrepareForSession(
      db, "SELECT correlation_id, fp64, fp32, fp16, raw FROM kernel_flops WHERE sid = ?1", sid);
  if (!stmt.ok()) return stmt.status();
  absl::Status status = EachRow(**stmt, [&](SqliteStatement& row) {
    v1::FlopCounters counters;
    const absl::string_view raw = row.ColumnText(4);
    if (!counters.ParseFromArray(raw.data(), static_cast<int>(raw.size()))) counters.Clear();
    counters.set_fp64(row.ColumnDouble(1));
    counters.set_fp32(row.ColumnDouble(2));
    counters.set_fp16(row.ColumnDouble(3));
    counters.clear_raw();  // audit values stay in the rank file
    flops.emplace(row.ColumnUint(0), std::move(counters));
  });
  if (!status.ok()) return status;
  return flops;
}

void ReadRange(const SqliteStatement& row, v1::RangeEvent& event) {
  event.set_path_id(row.ColumnUint(0));
  event.set_instance_id(row.ColumnUint(1));
  event.set_parent_instance_id(row.ColumnUint(2));
  event.set_thread_id(row.ColumnUint(3));
  event.set_start_ns(row.ColumnInt(4));
  event.set_end_ns(row.ColumnInt(5));
  event.set_kind(static_cast<v1::RangeKind>(row.ColumnInt(6)));
  event.set_counted(row.ColumnInt(7) != 0);
}

// Columns: rowid, then KernelRecord's fields in order (see kKernelsSql).
void ReadKernel(const SqliteStatement& row, v1::TraceActivity& activity) {
  activity.set_key(row.ColumnUint(0));
  v1::KernelRecord& k = *activity.mutable_kernel();
  k.set_correlation_id(row.ColumnUint(1));
  k.set_path_id(row.ColumnUint(2));
  k.set_range_instance_id(row.ColumnUint(3));
  k.set_name_id(static_cast<uint32_t>(row.ColumnUint(4)));
  k.set_device_id(static_cast<uint32_t>(row.ColumnUint(5)));
  k.set_context_id(static_cast<uint32_t>(row.ColumnUint(6)));
  k.set_stream_id(static_cast<uint32_t>(row.ColumnUint(7)));
  k.set_start_ns(row.ColumnInt(8));
  k.set_end_ns(row.ColumnInt(9));
  k.set_grid_x(static_cast<uint32_t>(row.ColumnUint(10)));
  k.set_grid_y(static_cast<uint32_t>(row.ColumnUint(11)));
  k.set_grid_z(static_cast<uint32_t>(row.ColumnUint(12)));
  k.set_block_x(static_cast<uint32_t>(row.ColumnUint(13)));
  k.set_block_y(static_cast<uint32_t>(row.ColumnUint(14)));
  k.set_block_z(static_cast<uint32_t>(row.ColumnUint(15)));
  k.set_kind(static_cast<v1::ActivityKind>(row.ColumnInt(16)));
  k.set_bytes(row.ColumnUint(17));
  k.set_graph_id(row.ColumnUint(18));
  k.set_graph_node_id(row.ColumnUint(19));
  k.set_counted(row.ColumnInt(20) != 0);
}

constexpr char kRangesSql[] =
    "SELECT path_id, instance_id, parent_instance_id, thread_id, start_ns, end_ns, kind, counted "
    "FROM range_events WHERE sid = ?1 AND end_ns >= ?2 AND start_ns <= ?3 "
    "ORDER BY start_ns, end_ns DESC";
constexpr char kInstancesSql[] =
    "SELECT instance_id FROM range_events WHERE sid = ?1 AND end_ns >= ?2 AND start_ns <= ?3";
constexpr char kKernelsSql[] =
    "SELECT rowid, correlation_id, path_id, range_instance_id, name_id, device_id, context_id, "
    "stream_id, start_ns, end_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z, kind, "
    "bytes, graph_id, graph_node_id, counted FROM kernels "
    "WHERE sid = ?1 AND end_ns >= ?2 AND start_ns <= ?3";
constexpr char kLaunchesSql[] =
    "SELECT range_instance_id FROM kernels WHERE sid = ?1 AND end_ns >= ?2 AND start_ns <= ?3";

// Range instance -> activities launched in it (first pass), then -> the next one's ordinal.
using Launches = absl::flat_hash_map<uint64_t, uint32_t>;

// The first pass: every range instance in the window, and how many of the window's activities
// each launched. Plain scans in file order; memory is one entry per range occurrence.
absl::StatusOr<Launches> CountLaunches(SqliteDb& db, int64_t sid, const TraceWindow& window,
                                       bool has_kernels) {
  Launches launches;
  absl::StatusOr<Statement> ranges = PrepareForSession(db, kInstancesSql, sid, &window);
  if (!ranges.ok()) return ranges.status();
  absl::Status status =
      EachRow(**ranges, [&](SqliteStatement& row) { launches.emplace(row.ColumnUint(0), 0); });
  if (!status.ok()) return status;
  if (!has_kernels) return launches;
  absl::StatusOr<Statement> kernels = PrepareForSession(db, kLaunchesSql, sid, &window);
  if (!kernels.ok()) return kernels.status();
  status = EachRow(**kernels, [&](SqliteStatement& row) {
    auto it = launches.find(row.ColumnUint(0));
    if (it != launches.end()) ++it->second;
  });
  if (!status.ok()) return status;
  return launches;
}

// The second pass over the range events, in start order (enclosing ranges first on a tie), so
// that the export can close each track's slices in order as it goes: each with its flow count
// (capped). Leaves every count at 0, ready to number the activities.
absl::Status SendRanges(SqliteDb& db, int64_t sid, const TraceWindow& window, Launches& launches,
                        uint64_t& flows_left_out, ChunkSender& sender) {
  absl::StatusOr<Statement> stmt = PrepareForSession(db, kRangesSql, sid, &window);
  if (!stmt.ok()) return stmt.status();
  while (!sender.stopped()) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::TraceRange& range = *sender.chunk().add_ranges();
    ReadRange(**stmt, *range.mutable_event());
    auto it = launches.find(range.event().instance_id());
    if (it != launches.end()) {
      const uint32_t flows = std::min<uint32_t>(it->second, kMaxFlowsPerRange);
      range.set_flows(flows);
      flows_left_out += it->second - flows;
      it->second = 0;
    }
    sender.Added(range.ByteSizeLong());
  }
  return absl::OkStatus();
}

// The second pass over the activities: each with its ordinal in its launch range, and its
// counted FLOPs.
absl::Status SendActivities(SqliteDb& db, int64_t sid, const TraceWindow& window,
                            Launches& launches, FlopsByCorrelation& flops, ChunkSender& sender) {
  absl::StatusOr<Statement> stmt = PrepareForSession(db, kKernelsSql, sid, &window);
  if (!stmt.ok()) return stmt.status();
  while (!sender.stopped()) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::TraceActivity& activity = *sender.chunk().add_activities();
    ReadKernel(**stmt, activity);
    auto range = launches.find(activity.kernel().range_instance_id());
    if (range != launches.end() && range->second < kMaxFlowsPerRange) {
      activity.set_flow(true);
      activity.set_launch_ordinal(range->second++);
    }
    auto counted = flops.find(activity.kernel().correlation_id());
    if (counted != flops.end()) {  // a graph's kernels share one id: the first one carries it
      *activity.mutable_flops() = std::move(counted->second);
      flops.erase(counted);
    }
    sender.Added(activity.ByteSizeLong());
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The `step` ranges that step folding packed into range_folds (none in files without the table).
absl::StatusOr<std::vector<StepSpan>> FoldedStepSpans(SqliteDb& db) {
  std::vector<StepSpan> spans;
  absl::StatusOr<absl::flat_hash_set<std::string>> tables = db.TableNames();
  if (!tables.ok()) return tables.status();
  if (!tables->contains("range_folds")) return spans;
  absl::flat_hash_set<std::pair<int64_t, uint64_t>> step_paths;  // (sid, path id)
  absl::StatusOr<Statement> stmt =
      db.Prepare("SELECT sid, id FROM range_paths WHERE domain = ?1 AND name = ?2");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, kFlopscopeDomain);
  (*stmt)->BindText(2, kStepRange);
  absl::Status status = EachRow(**stmt, [&](SqliteStatement& row) {
    step_paths.insert({row.ColumnInt(0), static_cast<uint64_t>(row.ColumnInt(1))});
  });
  if (!status.ok()) return status;
  if (step_paths.empty()) return spans;
  status = ForEachFoldedRange(db, [&](const FoldedRange& event) {
    if (step_paths.contains({event.sid, event.path_id})) {
      spans.push_back({event.start_ns, event.end_ns});
    }
  });
  if (!status.ok()) return status;
  return spans;
}

}  // namespace

absl::StatusOr<std::optional<TraceWindow>> StepTimeWindow(SqliteDb& db,
                                                          const StepWindowRequest& steps) {
  std::vector<StepSpan> spans;
  absl::StatusOr<Statement> stmt = db.Prepare(
      "SELECT e.start_ns, e.end_ns FROM range_events AS e JOIN range_paths AS p "
      "ON p.sid = e.sid AND p.id = e.path_id WHERE p.domain = ?1 AND p.name = ?2");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, kFlopscopeDomain);
  (*stmt)->BindText(2, kStepRange);
  absl::Status status = EachRow(**stmt, [&](SqliteStatement& row) {
    spans.push_back({row.ColumnInt(0), row.ColumnInt(1)});
  });
  if (!status.ok()) return status;
  // Steps that folding packed still count: step N is the rank's N-th step, as reports number it.
  absl::StatusOr<std::vector<StepSpan>> folded = FoldedStepSpans(db);
  if (!folded.ok()) return folded.status();
  spans.insert(spans.end(), folded->begin(), folded->end());
  const StepIndex index(std::move(spans));
  if (steps.first >= index.size()) return std::nullopt;
  const int64_t last = std::min(steps.last.value_or(index.size() - 1), index.size() - 1);
  return TraceWindow{index.at(steps.first).start_ns, index.at(last).end_ns};
}

namespace {

absl::Status ReadSessionTrace(SqliteDb& db, int64_t sid, const TraceWindow& window,
                              bool has_kernels, ChunkSender& sender) {
  if (absl::Status s = SendDefinitions(db, sid, sender); !s.ok()) return s;
  absl::StatusOr<Launches> launches = CountLaunches(db, sid, window, has_kernels);
  if (!launches.ok()) return launches.status();
  uint64_t flows_left_out = 0;
  absl::Status status = SendRanges(db, sid, window, *launches, flows_left_out, sender);
  if (status.ok() && has_kernels) {
    absl::StatusOr<FlopsByCorrelation> flops = ReadFlops(db, sid);
    status =
        flops.ok() ? SendActivities(db, sid, window, *launches, *flops, sender) : flops.status();
  }
  if (!status.ok()) return status;
  sender.chunk().set_flows_left_out(flows_left_out);
  sender.Flush();
  return absl::OkStatus();
}

// What step folding took out of the window (range_folds, schema/rank.sql): the events it packed
// and the end of the newest of them. Files from before folding have no such table.
struct FoldedSpan {
  uint64_t events = 0;
  int64_t until_ns = 0;
};

absl::StatusOr<FoldedSpan> FoldedInWindow(SqliteDb& db, const TraceWindow& window) {
  absl::StatusOr<Statement> stmt = db.Prepare(
      "SELECT COALESCE(SUM(events), 0), COALESCE(MAX(end_ns), 0) FROM range_folds "
      "WHERE end_ns >= ?1 AND start_ns <= ?2");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindInt(1, window.first_ns);
  (*stmt)->BindInt(2, window.last_ns);
  FoldedSpan span;
  absl::Status status = EachRow(**stmt, [&](SqliteStatement& row) {
    span.events = static_cast<uint64_t>(row.ColumnInt(0));
    span.until_ns = row.ColumnInt(1);
  });
  if (!status.ok()) return status;
  return span;
}

}  // namespace

absl::Status ReadRankTrace(SqliteDb& db, int32_t rank, const TraceWindow& window,
                           const std::function<bool(v1::TraceChunk)>& emit) {
  absl::StatusOr<absl::flat_hash_set<std::string>> tables = db.TableNames();
  if (!tables.ok()) return tables.status();
  const bool has_kernels = tables->contains("kernels") && tables->contains("kernel_flops");
  // One read transaction: every table as of the same commit, the writer never waited for.
  if (absl::Status s = db.Exec("BEGIN"); !s.ok()) return s;
  std::vector<std::pair<int64_t, v1::TraceChunk>> sessions;
  absl::StatusOr<Statement> stmt = db.Prepare(
      "SELECT sid, session_id, host, pid, command, start_time_ns, world_size FROM sessions "
      "ORDER BY sid");
  absl::Status status = stmt.status();
  if (status.ok()) {
    status = EachRow(**stmt, [&](SqliteStatement& row) {
      v1::TraceChunk& head = sessions.emplace_back(row.ColumnInt(0), v1::TraceChunk()).second;
      v1::TraceSession& session = *head.mutable_session();
      session.set_session_id(row.ColumnString(1));
      session.set_host(row.ColumnString(2));
      session.set_pid(row.ColumnInt(3));
      session.set_command(row.ColumnString(4));
      session.set_start_time_ns(row.ColumnInt(5));
      head.set_world_size(static_cast<int32_t>(row.ColumnInt(6)));
    });
  }
  FoldedSpan folded;
  if (status.ok() && tables->contains("range_folds")) {
    absl::StatusOr<FoldedSpan> span = FoldedInWindow(db, window);
    status = span.status();
    if (span.ok()) folded = *span;
  }
  bool stopped = false;
  for (auto& [sid, head] : sessions) {
    if (!status.ok() || stopped) break;
    ChunkSender sender(rank, sid, emit);
    *sender.chunk().mutable_session() = std::move(*head.mutable_session());
    sender.chunk().set_world_size(head.world_size());
    if (sid == sessions.front().first) {  // the rank's first chunk says what folding took
      sender.chunk().set_folded_range_events(folded.events);
      sender.chunk().set_folded_until_ns(folded.until_ns);
    }
    status = ReadSessionTrace(db, sid, window, has_kernels, sender);
    stopped = sender.stopped();
  }
  db.Exec("COMMIT").IgnoreError();  // read-only: nothing to lose
  if (!status.ok()) return status;
  if (stopped) return absl::CancelledError("the client stopped reading");
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
