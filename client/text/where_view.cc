// `flopscope where`: the text and JSON views of where each rank is (where_view.h).
#include "client/text/where_view.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/text/text_table.h"
#include "common/json/json_writer.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

constexpr char kFlagNote[] = "<- not where the others are";

std::string WhereAge(double seconds) { return absl::StrFormat("%.1f s", seconds); }

std::string WhereRanks(const std::vector<int32_t>& ranks) { return absl::StrJoin(ranks, ","); }

// "Net/slowed (forward)", "step/backward" when no module is open, "nothing open".
std::string Where(bool nothing_open, const std::string& module, const std::string& phase,
                  const std::string& phase_path) {
  if (nothing_open) return "nothing open";
  if (module.empty()) return phase_path;
  return phase.empty() ? module : absl::StrCat(module, " (", phase, ")");
}

std::string Where(const RankPlace& rank) {
  return Where(rank.state == RankState::kNothingOpen, rank.module, rank.phase, rank.phase_path);
}

std::string Where(const PlaceGroup& group) {
  return Where(group.nothing_open, group.module, group.phase, group.phase_path);
}

// The lines above the table: who is out of place, or what the running ranks share.
std::vector<std::string> Headline(const WhereAnswer& answer) {
  std::vector<std::string> lines;
  if (answer.groups.empty()) {
    lines.push_back("No rank is running: nothing is open.");
    return lines;
  }
  const Majority& majority = answer.majority;
  const bool one = majority.ranks.size() == 1;
  for (const RankPlace& rank : answer.ranks) {
    if (!rank.flagged) continue;
    const bool nothing = rank.state == RankState::kNothingOpen;
    std::string line = absl::StrCat(
        "rank ", rank.rank, " is not where the others are: ", nothing ? "" : "in ", Where(rank));
    if (!nothing) absl::StrAppend(&line, " for ", WhereAge(rank.age_s));
    absl::StrAppend(&line, "; ", one ? "rank " : "ranks ", WhereRanks(majority.ranks),
                    one ? " waits " : " wait ");
    if (majority.nothing_open) {
      absl::StrAppend(&line, "with nothing open");
    } else {
      absl::StrAppend(&line, "in ",
                      Where(false, majority.module, majority.phase, majority.phase_path), " for ",
                      WhereAge(majority.age_s));
    }
    lines.push_back(line);
  }
  if (!lines.empty()) return lines;
  const PlaceGroup& largest = answer.groups.front();
  if (answer.groups.size() == 1) {
    lines.push_back(absl::StrCat(
        "All ", largest.ranks.size(), " running ranks are in the same place: ", Where(largest),
        largest.nothing_open ? "" : absl::StrCat(" for ", WhereAge(largest.min_age_s), " or more"),
        "."));
  } else {
    lines.push_back(absl::StrCat("The running ranks are in ", answer.groups.size(),
                                 " places, and no phase or module holds more of them than "
                                 "every other: none is flagged."));
  }
  return lines;
}

// The table's row for a rank that is not running (ended, gone, ...).
std::vector<std::string> NotRunningRow(const RankPlace& rank) {
  switch (rank.state) {
    case RankState::kEnded:
      return {"ended", "", absl::StrCat(rank.rank), "", "", "nothing open at its end"};
    case RankState::kGone:
      return {rank.module.empty() ? rank.phase_path : rank.module,
              rank.phase,
              absl::StrCat(rank.rank),
              "",
              "",
              "ended with ranges open (killed?)"};
    case RankState::kNoSnapshot:
      return {"-", "", absl::StrCat(rank.rank),
              "",  "", "no snapshot (nothing opened yet, or an older injector)"};
    case RankState::kUnreadable:
      return {"-", "", absl::StrCat(rank.rank), "", "", absl::StrCat("unreadable: ", rank.problem)};
    default:
      return {};
  }
}

}  // namespace

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kOpen:
      return "open";
    case RankState::kNothingOpen:
      return "nothing_open";
    case RankState::kEnded:
      return "ended";
    case RankState::kGone:
      return "gone";
    case RankState::kNoSnapshot:
      return "no_snapshot";
    case RankState::kUnreadable:
      return "unreadable";
  }
  return "unknown";
}

std::string RenderWhereText(const std::string& job_id, const WhereAnswer& answer) {
  std::string out = absl::StrCat("Job ", PrintableForTerminal(job_id), ": ", answer.ranks.size(),
                                 answer.ranks.size() == 1 ? " rank" : " ranks", "\n");
  for (const std::string& line : Headline(answer)) {
    absl::StrAppend(&out, PrintableForTerminal(line), "\n");
  }
  TextTable table({"in (innermost open module)", "phase", "rank", "open for", "oldest open", ""});
  for (const PlaceGroup& group : answer.groups) {
    for (int32_t number : group.ranks) {
      for (const RankPlace& rank : answer.ranks) {
        if (rank.rank != number) continue;
        const bool nothing = rank.state == RankState::kNothingOpen;
        table.AddRow({nothing ? "nothing open" : (rank.module.empty() ? "-" : rank.module),
                      rank.phase.empty() ? "-" : rank.phase, absl::StrCat(rank.rank),
                      nothing ? "" : WhereAge(rank.age_s),
                      nothing ? "" : WhereAge(rank.oldest_age_s), rank.flagged ? kFlagNote : ""});
      }
    }
  }
  for (const RankPlace& rank : answer.ranks) {
    if (rank.group < 0) table.AddRow(NotRunningRow(rank));
  }
  absl::StrAppend(&out, "\n", table.Render());
  return out;
}

std::string RenderWhereJson(const std::string& job_id, const WhereAnswer& answer) {
  JsonWriter json;
  auto text_or_null = [&json](const std::string& text) {
    if (text.empty()) {
      json.Null();
    } else {
      json.String(text);
    }
  };
  json.BeginObject().Key("job").String(job_id).Key("ranks").BeginArray();
  for (const RankPlace& rank : answer.ranks) {
    json.BeginObject().Key("rank").Int(rank.rank).Key("state").String(RankStateName(rank.state));
    json.Key("module");
    text_or_null(rank.module);
    json.Key("phase");
    text_or_null(rank.phase);
    json.Key("phase_path");
    text_or_null(rank.phase_path);
    json.Key("open_for_s").Double(rank.age_s).Key("oldest_open_s").Double(rank.oldest_age_s);
    json.Key("snapshot_age_s").Double(rank.snapshot_age_s).Key("thread_id").Uint(rank.thread_id);
    json.Key("group");
    if (rank.group < 0) {
      json.Null();
    } else {
      json.Int(rank.group);
    }
    json.Key("flagged").Bool(rank.flagged);
    if (!rank.problem.empty()) json.Key("problem").String(rank.problem);
    json.EndObject();
  }
  json.EndArray().Key("groups").BeginArray();
  for (const PlaceGroup& group : answer.groups) {
    json.BeginObject().Key("module");
    text_or_null(group.module);
    json.Key("phase");
    text_or_null(group.phase);
    json.Key("phase_path");
    text_or_null(group.phase_path);
    json.Key("nothing_open").Bool(group.nothing_open).Key("ranks").BeginArray();
    for (int32_t rank : group.ranks) json.Int(rank);
    json.EndArray().Key("open_for_s").Double(group.max_age_s).EndObject();
  }
  json.EndArray().Key("flagged").BeginArray();
  for (int32_t rank : answer.flagged) json.Int(rank);
  json.EndArray().Key("majority");
  if (answer.flagged.empty()) {
    json.Null();
  } else {
    const Majority& majority = answer.majority;
    json.BeginObject().Key("ranks").BeginArray();
    for (int32_t rank : majority.ranks) json.Int(rank);
    json.EndArray().Key("module");
    text_or_null(majority.module);
    json.Key("phase");
    text_or_null(majority.phase);
    json.Key("phase_path");
    text_or_null(majority.phase_path);
    json.Key("nothing_open").Bool(majority.nothing_open);
    json.Key("open_for_s").Double(majority.age_s).EndObject();
  }
  json.EndObject();
  return json.Finish();
}

}  // namespace flopscope::client
