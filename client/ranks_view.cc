#include "client/ranks_view.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/json_writer.h"
#include "client/text_table.h"

namespace flopscope::client {
namespace {

uint64_t LostRecords(const flopscope::v1::RankInfo& rank) {
  uint64_t lost = 0;
  for (const auto& loss : rank.losses()) lost += loss.records();
  return lost;
}

std::string Devices(const flopscope::v1::RankInfo& rank) {
  if (rank.devices().empty()) return "-";
  std::vector<std::string> names;
  for (const auto& device : rank.devices()) names.push_back(device.name());
  return absl::StrJoin(names, ", ");
}

// "tp 1 pp 0 dp 3", or "-" when the rank announced no layout beyond one GPU.
std::string Coordinates(const flopscope::v1::RankInfo& rank) {
  const auto& layout = rank.layout();
  if (layout.tp_size() <= 1 && layout.pp_size() <= 1 && layout.dp_size() <= 1) return "-";
  return absl::StrCat("tp ", layout.tp_rank(), " pp ", layout.pp_rank(), " dp ", layout.dp_rank());
}

}  // namespace

std::string RenderRanksText(const flopscope::v1::ListRanksResponse& ranks) {
  TextTable table({"rank", "host", "pid", "device", "layout", "sessions", "connected", "ranges",
                   "kernels", "lost"});
  std::set<std::string> gpu_statuses;
  for (const auto& rank : ranks.ranks()) {
    table.AddRow({absl::StrCat(rank.rank()), rank.host().empty() ? "-" : rank.host(),
                  absl::StrCat(rank.pid()), Devices(rank), Coordinates(rank),
                  absl::StrCat(rank.sessions()), rank.connected() ? "yes" : "no",
                  absl::StrCat(rank.range_events()), absl::StrCat(rank.kernels()),
                  absl::StrCat(LostRecords(rank))});
    if (rank.kernels() == 0 && !rank.gpu_status().empty()) gpu_statuses.insert(rank.gpu_status());
  }
  std::string text = table.Render();
  for (const std::string& status : gpu_statuses) {
    absl::StrAppend(&text, "No GPU records: ", status, "\n");
  }
  return text;
}

std::string RenderRanksJson(const flopscope::v1::ListRanksResponse& ranks) {
  JsonWriter json;
  json.BeginObject().Key("ranks").BeginArray();
  for (const auto& rank : ranks.ranks()) {
    json.BeginObject();
    json.Key("rank").Int(rank.rank());
    json.Key("host").String(rank.host());
    json.Key("pid").Int(rank.pid());
    json.Key("devices").BeginArray();
    for (const auto& device : rank.devices()) json.String(device.name());
    json.EndArray();
    json.Key("tp_rank").Uint(rank.layout().tp_rank());
    json.Key("pp_rank").Uint(rank.layout().pp_rank());
    json.Key("dp_rank").Uint(rank.layout().dp_rank());
    json.Key("world_size").Int(rank.world_size());
    json.Key("sessions").Uint(rank.sessions());
    json.Key("connected").Bool(rank.connected());
    json.Key("ranges").Uint(rank.range_events());
    json.Key("kernels").Uint(rank.kernels());
    json.Key("lost").Uint(LostRecords(rank));
    json.Key("gpu_status").String(rank.gpu_status());
    json.EndObject();
  }
  json.EndArray().EndObject();
  return json.Finish();
}

}  // namespace flopscope::client
