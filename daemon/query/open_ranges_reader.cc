// A rank file's latest snapshot of open ranges, paths spelled out (open_ranges_reader.h).
#include "daemon/query/open_ranges_reader.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/validate/batch_validator.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {
namespace {

// Spells out path ids of one session as "a/b/c", each path looked up once.
class PathNames {
 public:
  PathNames(SqliteDb& db, int64_t sid) : db_(db), sid_(sid) {}

  absl::StatusOr<std::string> Name(uint64_t id) {
    if (auto found = names_.find(id); found != names_.end()) return found->second;
    if (!lookup_) {
      absl::StatusOr<std::unique_ptr<SqliteStatement>> prepared =
          db_.Prepare("SELECT parent_id, name FROM range_paths WHERE sid = ? AND id = ?");
      if (!prepared.ok()) return prepared.status();
      lookup_ = *std::move(prepared);
    }
    std::vector<std::string> parts;
    // Bounded: the validator keeps the tree at most kMaxNestingDepth deep.
    for (uint64_t at = id; at != 0 && parts.size() <= kMaxNestingDepth;) {
      lookup_->BindInt(1, sid_);
      lookup_->BindUint(2, at);
      absl::StatusOr<bool> row = lookup_->Step();
      if (!row.ok()) return row.status();
      if (!*row)
        return absl::DataLossError(absl::StrCat("open range path ", at, " is not defined"));
      const uint64_t parent = lookup_->ColumnUint(0);
      parts.push_back(lookup_->ColumnString(1));
      lookup_->Reset();
      at = parent;
    }
    std::reverse(parts.begin(), parts.end());
    std::string name = absl::StrJoin(parts, "/");
    names_.emplace(id, name);
    return name;
  }

 private:
  SqliteDb& db_;
  const int64_t sid_;
  std::unique_ptr<SqliteStatement> lookup_;
  absl::flat_hash_map<uint64_t, std::string> names_;
};

absl::Status Spell(PathNames& names, const google::protobuf::RepeatedPtrField<v1::OpenRange>& in,
                   google::protobuf::RepeatedPtrField<v1::OpenRangeAt>* out) {
  for (const v1::OpenRange& range : in) {
    absl::StatusOr<std::string> name = names.Name(range.path_id());
    if (!name.ok()) return name.status();
    v1::OpenRangeAt* at = out->Add();
    at->set_path(*std::move(name));
    at->set_start_ns(range.start_ns());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<OpenRangesSnapshot>> ReadInTransaction(SqliteDb& db) {
  absl::StatusOr<absl::flat_hash_set<std::string>> tables = db.TableNames();
  if (!tables.ok()) return tables.status();
  if (!tables->contains("open_ranges")) return std::nullopt;
  absl::StatusOr<std::unique_ptr<SqliteStatement>> latest = db.Prepare(
      "SELECT o.sid, s.session_id, o.snapshot FROM open_ranges o JOIN sessions s USING (sid) "
      "ORDER BY o.time_ns DESC LIMIT 1");
  if (!latest.ok()) return latest.status();
  absl::StatusOr<bool> row = (*latest)->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  const int64_t sid = (*latest)->ColumnInt(0);
  OpenRangesSnapshot snapshot;
  snapshot.session_id = (*latest)->ColumnString(1);
  v1::OpenRanges stored;
  const absl::string_view bytes = (*latest)->ColumnText(2);
  if (!stored.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("the stored open ranges do not parse");
  }
  (*latest)->Reset();
  snapshot.time_ns = stored.time_ns();
  PathNames names(db, sid);
  for (const v1::ThreadOpenRanges& thread : stored.threads()) {
    v1::ThreadOpenStack& stack = snapshot.threads.emplace_back();
    stack.set_thread_id(thread.thread_id());
    stack.set_module_depth(thread.module_depth());
    stack.set_phase_depth(thread.phase_depth());
    if (absl::Status s = Spell(names, thread.modules(), stack.mutable_modules()); !s.ok()) return s;
    if (absl::Status s = Spell(names, thread.phases(), stack.mutable_phases()); !s.ok()) return s;
  }
  return snapshot;
}

}  // namespace

absl::StatusOr<std::optional<OpenRangesSnapshot>> ReadLatestOpenRanges(SqliteDb& db) {
  // One read transaction: the snapshot and the paths it names as of the same commit.
  if (absl::Status s = db.Exec("BEGIN"); !s.ok()) return s;
  absl::StatusOr<std::optional<OpenRangesSnapshot>> snapshot = ReadInTransaction(db);
  db.Exec("COMMIT").IgnoreError();  // read-only: nothing to lose
  return snapshot;
}

}  // namespace flopscope::daemon
