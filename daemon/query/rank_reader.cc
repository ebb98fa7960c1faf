#include "daemon/query/rank_reader.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/nvtx_vocabulary.h"
#include "common/sqlite/sqlite_db.h"
#include "daemon/query/range_row_cache.h"
#include "daemon/report/report_builder.h"
#include "daemon/report/session_path_table.h"
#include "daemon/store/range_fold_codec.h"
#include "daemon/store/rank_schema.h"

namespace flopscope::daemon {
namespace {

// Runs `sql` and hands every row to `on_row`.
template <typename OnRow>
absl::Status ForEachRow(SqliteDb& db, const char* sql, OnRow on_row) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  while (true) {
    absl::StatusOr<bool> row = (*stmt)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    on_row(**stmt);
  }
}

// Rank files written before kernel tracing lack its tables; they read as empty.
absl::StatusOr<bool> TableExists(SqliteDb& db, const char* name) {
  absl::StatusOr<std::unique_ptr<SqliteStatement>> stmt =
      db.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  if (!stmt.ok()) return stmt.status();
  (*stmt)->BindText(1, name);
  absl::StatusOr<bool> row = (*stmt)->Step();
  (*stmt)->Reset();
  return row;
}

absl::Status ReadPaths(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db, "SELECT sid, id, parent_id, domain, name FROM range_paths ORDER BY sid, id",
      [&](SqliteStatement& row) {
        snapshot->paths.push_back({row.ColumnInt(0), row.ColumnUint(1), row.ColumnUint(2),
                                   row.ColumnString(3), row.ColumnString(4)});
      });
}

absl::Status ReadStats(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT sid, path_id, calls, cpu_time_ns, min_ns, max_ns, kernels, gpu_time_ns, flops, "
      "counted_kernels FROM module_stats ORDER BY sid, path_id",
      [&](SqliteStatement& row) {
        RankSnapshot::PathStats& entry = snapshot->stats.emplace_back();
        entry.sid = row.ColumnInt(0);
        entry.path_id = row.ColumnUint(1);
        entry.stats.calls = row.ColumnUint(2);
        entry.stats.cpu_time_ns = row.ColumnInt(3);
        entry.stats.min_ns = row.ColumnInt(4);
        entry.stats.max_ns = row.ColumnInt(5);
        entry.stats.kernels = row.ColumnUint(6);
        entry.stats.gpu_time_ns = row.ColumnInt(7);
        entry.stats.has_flops = !row.ColumnIsNull(8);
        entry.stats.flops = row.ColumnDouble(8);
        entry.stats.counted_kernels = row.ColumnUint(9);
      });
}

absl::Status ReadMemoryStats(SqliteDb& db, RankSnapshot* snapshot) {
  absl::flat_hash_map<std::pair<int64_t, uint64_t>, size_t> rows;
  for (size_t i = 0; i < snapshot->stats.size(); ++i) {
    rows[{snapshot->stats[i].sid, snapshot->stats[i].path_id}] = i;
  }
  return ForEachRow(
      db, "SELECT sid, path_id, kind, count, time_ns, bytes FROM memory_stats",
      [&](SqliteStatement& row) {
        const std::pair<int64_t, uint64_t> key{row.ColumnInt(0), row.ColumnUint(1)};
        auto it = rows.find(key);
        if (it == rows.end()) {  // module_stats always has the row; a hand-edited file may not
          it = rows.emplace(key, snapshot->stats.size()).first;
          snapshot->stats.push_back({key.first, key.second, SelfStats{}});
        }
        SelfStats& stats = snapshot->stats[it->second].stats;
        MemoryTotals& totals =
            row.ColumnInt(2) == v1::ACTIVITY_KIND_MEMSET ? stats.sets : stats.copies;
        totals.count += row.ColumnUint(3);
        totals.time_ns += row.ColumnInt(4);
        totals.bytes += row.ColumnUint(5);
      });
}

// The `flopscope`-domain paths of each session: the step and the phases (DESIGN: Time).
enum class PathRole : uint8_t { kModule, kPhase, kStep, kForward, kBackward };

using PathRoles = SessionPathTable<PathRole>;

PathRoles FlopscopeRoles(const RankSnapshot& snapshot) {
  PathRoles roles(PathRole::kModule);
  for (const RankSnapshot::Path& path : snapshot.paths) {
    if (path.domain != kFlopscopeDomain) continue;
    PathRole role = PathRole::kPhase;
    if (path.name == kStepRange) role = PathRole::kStep;
    if (path.name == kForwardPhase) role = PathRole::kForward;
    if (path.name == kBackwardPhase) role = PathRole::kBackward;
    roles.At(path.sid, path.id) = role;
  }
  return roles;
}

// Module occurrences roll their kernels up to the occurrences enclosing them (SpanRollup: only
// occurrences with kernels stay in memory), and every occurrence goes to the per-step figures
// (StepStatistics). Events must come in commit order.
void AddRangeEvent(const RangeRow& row, bool with_spans, PathRoles& roles, SpanRollup& rollup,
                   StepStatistics& steps) {
  RangeOccurrence occurrence{row.start_ns, row.end_ns - row.start_ns, 0, false, row.counted};
  std::optional<OccurrenceSpan> span;
  if (with_spans && row.kind == v1::RANGE_KIND_PUSH_POP) {
    span = rollup.AddRange(row.sid, row.instance_id, row.parent_instance_id, row.path_id);
  }
  if (const PathRole role = roles.Get(row.sid, row.path_id); role != PathRole::kModule) {
    if (role == PathRole::kForward || role == PathRole::kBackward) {
      steps.AddPass(role == PathRole::kForward ? Pass::kForward : Pass::kBackward, occurrence);
    }
    steps.AddPhase(row.sid, row.path_id, occurrence, role == PathRole::kStep);
    return;
  }
  if (span) {
    occurrence.busy_ns = span->busy_ns;
    occurrence.gpu = true;
  }
  steps.AddModule(row.sid, row.path_id, occurrence);
}

}  // namespace

absl::Status ForEachFoldedRange(SqliteDb& db,
                                const std::function<void(const FoldedRange&)>& on_event) {
  absl::Status decoded = absl::OkStatus();
  absl::Status status =
      ForEachRow(db, "SELECT data FROM range_folds ORDER BY rowid", [&](SqliteStatement& row) {
        if (decoded.ok()) decoded = DecodeRangeFold(row.ColumnText(0), on_event);
      });
  if (!status.ok()) return status;
  return decoded;
}

namespace {

// The range events streamed from the file: the folded ones, then the raw ones.
absl::Status StreamRanges(SqliteDb& db, bool with_spans, PathRoles& roles, SpanRollup& rollup,
                          StepStatistics& steps) {
  absl::Status status = ForEachFoldedRange(db, [&](const FoldedRange& event) {
    AddRangeEvent({event.sid, event.instance_id, event.parent_instance_id, event.path_id,
                   event.start_ns, event.end_ns, event.kind, event.counted},
                  with_spans, roles, rollup, steps);
  });
  if (!status.ok()) return status;
  if (with_spans) {
    status = ForEachRow(
        db,
        "SELECT sid, instance_id, parent_instance_id, path_id, start_ns, end_ns, kind, counted "
        "FROM range_events ORDER BY rowid",
        [&](SqliteStatement& row) {
          AddRangeEvent({row.ColumnInt(0), row.ColumnUint(1), row.ColumnUint(2), row.ColumnUint(3),
                         row.ColumnInt(4), row.ColumnInt(5), static_cast<int32_t>(row.ColumnInt(6)),
                         row.ColumnInt(7) != 0},
                        with_spans, roles, rollup, steps);
        });
  } else {
    // No kernels: the parent links are not followed, so five columns of the eight are read
    // (a report over a live 64-rank job streams millions of rows; each column costs).
    status = ForEachRow(
        db, "SELECT sid, path_id, start_ns, end_ns, counted FROM range_events ORDER BY rowid",
        [&](SqliteStatement& row) {
          RangeRow range;
          range.sid = row.ColumnInt(0);
          range.path_id = row.ColumnUint(1);
          range.start_ns = row.ColumnInt(2);
          range.end_ns = row.ColumnInt(3);
          range.counted = row.ColumnInt(4) != 0;
          AddRangeEvent(range, with_spans, roles, rollup, steps);
        });
  }
  return status;
}

// The kernels of every occurrence (folded ones too) first, then one pass over the range events
// in commit order: the folded ones, then the raw ones. From `cached` when given (brought up to
// date first), else streamed from the file.
absl::Status ReadRanges(SqliteDb& db, bool has_kernel_tables, const RankReadOptions& options,
                        RangeRows* cached, RankSnapshot* snapshot) {
  SpanRollup rollup;
  absl::Status status = absl::OkStatus();
  if (cached != nullptr) {
    status = cached->Refresh(db, db.path());
    if (!status.ok()) return status;
    if (!cached->packed()) cached = nullptr;  // an event the cache cannot hold: read the file
  }
  if (cached != nullptr) {
    for (const FoldedActivity& folded : cached->folded_activity) {
      rollup.AddOccurrence(folded.sid, folded.instance_id, folded.activity);
    }
  } else {
    status = ForEachFoldedRange(db, [&](const FoldedRange& event) {
      if (event.has_stats) rollup.AddOccurrence(event.sid, event.instance_id, event.stats);
    });
    if (!status.ok()) return status;
  }
  if (has_kernel_tables) {
    status = ForEachRow(
        db,
        "SELECT sid, instance_id, path_id, kernels, first_start_ns, last_end_ns, busy_ns "
        "FROM instance_stats",
        [&](SqliteStatement& row) {
          rollup.AddOccurrence(
              row.ColumnInt(0), row.ColumnUint(1),
              InstanceActivity{row.ColumnUint(2), row.ColumnUint(3), row.ColumnInt(4),
                               row.ColumnInt(5), row.ColumnInt(6)});
        });
    if (!status.ok()) return status;
  }
  const bool with_spans = !rollup.empty();
  PathRoles roles = FlopscopeRoles(*snapshot);
  StepStatistics steps(options.step_window);
  if (cached != nullptr) {
    steps.Reserve(cached->size());
    cached->ForEach(
        [&](const RangeRow& row) { AddRangeEvent(row, with_spans, roles, rollup, steps); });
  } else {
    status = StreamRanges(db, with_spans, roles, rollup, steps);
    if (!status.ok()) return status;
  }
  std::vector<OccurrenceSpan> unclosed;
  if (with_spans) snapshot->spans = rollup.Finish(steps.wants_modules() ? &unclosed : nullptr);
  for (const OccurrenceSpan& span : unclosed) {
    // Kernels with no range event of their own (graph replays): placed by their first start.
    if (roles.Get(span.sid, span.path_id) == PathRole::kModule) {
      steps.AddModule(span.sid, span.path_id, {span.first_start_ns, 0, span.busy_ns, true, false});
    }
  }
  snapshot->step_figures = steps.Finish();
  return absl::OkStatus();
}

// Raw kernels and the groups of folded ones (kernel_folds), grouped together.
absl::Status ReadKernelGroups(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT g.sid, g.path_id, g.kind, COALESCE(s.value, ''), g.n, g.total, g.shortest, "
      "g.longest, g.bytes FROM (SELECT sid, path_id, kind, name_id, SUM(n) AS n, "
      "SUM(total) AS total, MIN(shortest) AS shortest, MAX(longest) AS longest, "
      "SUM(bytes) AS bytes FROM (SELECT sid, path_id, kind, name_id, 1 AS n, "
      "end_ns - start_ns AS total, end_ns - start_ns AS shortest, end_ns - start_ns AS longest, "
      "bytes FROM kernels UNION ALL SELECT sid, path_id, kind, name_id, count, total_ns, min_ns, "
      "max_ns, bytes FROM kernel_folds) GROUP BY sid, path_id, kind, name_id) g "
      "LEFT JOIN strings s ON s.sid = g.sid AND s.id = g.name_id",
      [&](SqliteStatement& row) {
        RankSnapshot::KernelGroup& group = snapshot->kernel_groups.emplace_back();
        group.sid = row.ColumnInt(0);
        group.path_id = row.ColumnUint(1);
        const int64_t kind = row.ColumnInt(2);
        group.kind = v1::ActivityKind_IsValid(static_cast<int>(kind))
                         ? static_cast<v1::ActivityKind>(kind)
                         : v1::ACTIVITY_KIND_KERNEL;
        group.name = row.ColumnString(3);
        group.count = row.ColumnUint(4);
        group.total_ns = row.ColumnInt(5);
        group.min_ns = row.ColumnInt(6);
        group.max_ns = row.ColumnInt(7);
        group.bytes = row.ColumnUint(8);
      });
}

// module_flops or phase_flops (same columns).
absl::Status ReadPrecisions(SqliteDb& db, const char* sql,
                            std::vector<RankSnapshot::PrecisionRow>* rows) {
  return ForEachRow(db, sql, [&](SqliteStatement& row) {
    rows->push_back({row.ColumnInt(0), row.ColumnUint(1), row.ColumnString(2), row.ColumnDouble(3),
                     row.ColumnUint(4)});
  });
}

// Per (module path, phase path): the raw kernel_flops rows, which stay raw (counted kernels are
// few, and folding leaves them), every precision added up; the tensor sources are a JSON object
// (CountedWriter's TensorFlopsJson).
absl::Status ReadPathPhaseFlops(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT sid, path_id, phase_path_id, SUM(fp64 + fp32 + fp16 + CASE WHEN json_valid(tensor) "
      "THEN (SELECT COALESCE(SUM(value), 0) FROM json_each(tensor)) ELSE 0 END) FROM "
      "kernel_flops WHERE phase_path_id != 0 GROUP BY sid, path_id, phase_path_id",
      [&](SqliteStatement& row) {
        snapshot->path_phase_flops.push_back(
            {row.ColumnInt(0), row.ColumnUint(1), row.ColumnUint(2), row.ColumnDouble(3)});
      });
}

absl::Status ReadCountedSteps(SqliteDb& db, RankSnapshot* snapshot) {
  // A session with counted FLOPs but no step marks counted one (unknown) span of work.
  return ForEachRow(db,
                    "SELECT m.sid, COUNT(c.step) FROM (SELECT DISTINCT sid FROM module_stats "
                    "WHERE counted_kernels > 0 OR flops IS NOT NULL) AS m "
                    "LEFT JOIN counted_steps AS c ON c.sid = m.sid GROUP BY m.sid",
                    [&](SqliteStatement& row) {
                      snapshot->counted_steps += std::max<uint64_t>(row.ColumnUint(1), 1);
                    });
}

absl::Status ReadWindows(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(
      db,
      "SELECT first_step, last_step, trigger, metric_set, chip, passes, kernels_counted, "
      "ranges_unmatched, start_ns, end_ns, status, comm_kernels_excluded FROM counter_windows "
      "ORDER BY sid, rowid",
      [&](SqliteStatement& row) {
        v1::CounterWindowRecord& window = snapshot->windows.emplace_back();
        window.set_first_step(row.ColumnInt(0));
        window.set_last_step(row.ColumnInt(1));
        window.set_trigger(row.ColumnString(2));
        window.set_metric_set(row.ColumnString(3));
        window.set_chip(row.ColumnString(4));
        window.set_passes(static_cast<uint32_t>(row.ColumnInt(5)));
        window.set_kernels_counted(row.ColumnUint(6));
        window.set_ranges_unmatched(row.ColumnUint(7));
        window.set_start_ns(row.ColumnInt(8));
        window.set_end_ns(row.ColumnInt(9));
        window.set_status(row.ColumnString(10));
        window.set_comm_kernels_excluded(row.ColumnUint(11));
      });
}

// Everything counters left: small tables, kept current at ingest.
absl::Status ReadCounted(SqliteDb& db, RankSnapshot* snapshot) {
  absl::Status status = ReadPrecisions(
      db, "SELECT sid, path_id, precision, flops, kernels FROM module_flops ORDER BY sid, path_id",
      &snapshot->module_flops);
  if (status.ok()) {
    status = ReadPrecisions(db,
                            "SELECT sid, phase_path_id, precision, flops, kernels FROM phase_flops "
                            "ORDER BY sid, phase_path_id",
                            &snapshot->phase_flops);
  }
  if (status.ok()) status = ReadPathPhaseFlops(db, snapshot);
  if (status.ok()) status = ReadCountedSteps(db, snapshot);
  if (status.ok()) status = ReadWindows(db, snapshot);
  return status;
}

absl::Status ReadMetadata(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(db, "SELECT time_ns, key, value FROM metadata ORDER BY sid, rowid",
                    [&](SqliteStatement& row) {
                      v1::Metadata& entry = snapshot->metadata.emplace_back();
                      entry.set_time_ns(row.ColumnInt(0));
                      entry.set_key(row.ColumnString(1));
                      entry.set_value(row.ColumnString(2));
                    });
}

absl::Status ReadLosses(SqliteDb& db, RankSnapshot* snapshot) {
  return ForEachRow(db, "SELECT cause, SUM(records) FROM losses GROUP BY cause",
                    [&](SqliteStatement& row) {
                      snapshot->losses[static_cast<int>(row.ColumnInt(0))] = row.ColumnUint(1);
                    });
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> RankReader::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::OpenExisting(path);
  if (!db.ok()) return db.status();
  // Files of jobs that ended before this daemon version are only ever opened here.
  if (absl::Status s = RankSchema::Upgrade(**db); !s.ok()) return s;
  return db;
}

absl::StatusOr<RankSnapshot> RankReader::Read(const std::string& path,
                                              const RankReadOptions& options) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = Open(path);
  if (!db.ok()) return db.status();
  return Read(**db, options);
}

absl::StatusOr<RankSnapshot> RankReader::Read(SqliteDb& db, const RankReadOptions& options) {
  return Read(db, options, nullptr);
}

absl::StatusOr<RankSnapshot> RankReader::Read(SqliteDb& db, const RankReadOptions& options,
                                              RangeRows* cached) {
  // One read transaction: every table as of the same commit.
  if (absl::Status s = db.Exec("BEGIN"); !s.ok()) return s;
  RankSnapshot snapshot;
  absl::Status status = ReadPaths(db, &snapshot);
  if (status.ok()) status = ReadStats(db, &snapshot);
  absl::StatusOr<bool> has_kernel_tables = TableExists(db, "instance_stats");
  if (status.ok()) status = has_kernel_tables.status();
  if (status.ok() && *has_kernel_tables) status = ReadMemoryStats(db, &snapshot);
  if (status.ok()) status = ReadRanges(db, *has_kernel_tables, options, cached, &snapshot);
  if (status.ok() && options.kernel_groups) status = ReadKernelGroups(db, &snapshot);
  if (status.ok()) status = ReadMetadata(db, &snapshot);
  if (status.ok()) status = ReadLosses(db, &snapshot);
  if (status.ok()) status = ReadCounted(db, &snapshot);
  db.Exec("COMMIT").IgnoreError();  // read-only: nothing to lose
  if (!status.ok()) return status;
  return snapshot;
}

}  // namespace flopscope::daemon
