#include "client/text/ranks_view.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/text/deepspeed_format.h"
#include "client/text/loss_cause_names.h"
#include "client/text/memory_view.h"
#include "client/text/text_table.h"
#include "common/json/json_writer.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

uint64_t LostRecords(const flopscope::v1::RankInfo& rank) {
  uint64_t lost = 0;
  for (const auto& loss : rank.losses()) {
    if (!CountsSessions(loss.cause())) lost += loss.records();
  }
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

std::string Seconds(const std::optional<double>& seconds) {
  return seconds ? DurationToString(*seconds) : "-";
}

std::string Mfu(const Figure& mfu) {
  return mfu.value ? absl::StrFormat("%.1f%%", *mfu.value * 100) : "-";
}

// For a straggler: "others waited 150.2 ms: model/layer.3 forward" (or ": between steps") for the
// rank the others waited for, "+31.0% vs 1.2 s: encoder/layer.3 +350 ms" for a slower step (the
// module's pass said where it is the backward); "" otherwise.
std::string SlowCell(const std::optional<Straggler>& straggler) {
  if (!straggler) return "";
  if (straggler->cause == StragglerCause::kWaitedFor) {
    const char* pass = StragglerPassName(straggler->pass);
    return absl::StrCat(
        "others waited ", DurationToString(straggler->waited_s), ": ",
        straggler->module.empty() ? pass : absl::StrCat(straggler->module, " ", pass));
  }
  std::string cell = absl::StrFormat("+%.1f%% vs %s", straggler->excess_pct,
                                     DurationToString(straggler->median_step_s));
  if (!straggler->module.empty()) {
    absl::StrAppend(&cell, ": ", straggler->module,
                    straggler->pass == StragglerPass::kBackward ? " backward" : "", " +",
                    DurationToString(straggler->module_excess_s));
  }
  return cell;
}

// The line under the table for a rank the others waited for: how long, and for what. The wait
// is its excess over the other ranks' median in the pass; the module carries at least half.
std::string WaitedForLine(int32_t rank, const Straggler& straggler) {
  std::string line = absl::StrCat("Rank ", rank, " held the others up: they waited ",
                                  DurationToString(straggler.waited_s), " per step for ");
  if (straggler.pass == StragglerPass::kBetweenSteps) {
    absl::StrAppend(&line, "it between steps (its step-to-step period less its step, above the ",
                    "other ranks' median)\n");
  } else {
    absl::StrAppend(&line, "its ", StragglerPassName(straggler.pass), " (",
                    PrintableForTerminal(straggler.module), ": +",
                    DurationToString(straggler.module_excess_s),
                    " above the other ranks' median)\n");
  }
  return line;
}

// The JSON's name of a pass: "forward", "backward", "between_steps", "".
const char* PassKey(StragglerPass pass) {
  return pass == StragglerPass::kBetweenSteps ? "between_steps" : StragglerPassName(pass);
}

std::vector<std::string> FigureCells(const RankFigures* figures) {
  if (figures == nullptr) return {"-", "-", "-", "-", "-", "-", "-", ""};
  const Profile& profile = figures->profile;
  const Figure& flops = profile.fwd_bwd_flops_per_s;
  return {Seconds(StepTimeOf(profile)),
          Seconds(profile.fwd_latency_s.value),
          Seconds(profile.bwd_latency_s.value),
          Seconds(profile.step_latency_s.value),
          flops.value ? FlopsToString(*flops.value) : "-",
          Mfu(profile.mfu),
          MemoryCell(profile.memory),
          SlowCell(figures->straggler)};
}

void WriteOptional(JsonWriter& json, const char* key, const std::optional<double>& value) {
  json.Key(key);
  if (value) {
    json.Double(*value);
  } else {
    json.Null();
  }
}

void WriteFiguresJson(const RankFigures& figures, JsonWriter& json) {
  const Profile& profile = figures.profile;
  json.Key("steps").Uint(profile.steps);
  WriteOptional(json, "step_s", StepTimeOf(profile));
  WriteOptional(json, "fwd_s", profile.fwd_latency_s.value);
  WriteOptional(json, "bwd_s", profile.bwd_latency_s.value);
  WriteOptional(json, "opt_s", profile.step_latency_s.value);
  WriteOptional(json, "flops_per_s", profile.fwd_bwd_flops_per_s.value);
  WriteOptional(json, "mfu", profile.mfu.value);
  json.Key("mfu_note").String(profile.mfu.note);
  json.Key("problem").String(figures.problem);
  // The rank's memory ledger (memory_view.h), null where its hooks announced none.
  json.Key("memory");
  if (profile.memory.empty() || profile.memory.front().setup.empty()) {
    json.Null();
  } else {
    WriteMemoryJson(profile.memory.front(), json);
  }
  // The file the daemon left alone in this rank's place, when it read the one beside it.
  json.Key("left_alone").BeginArray();
  for (const auto& left_alone : profile.left_alone_files) json.String(left_alone.second);
  json.EndArray();
  json.Key("straggler");
  if (!figures.straggler) {
    json.Null();
    return;
  }
  const Straggler& straggler = *figures.straggler;
  json.BeginObject();
  json.Key("step_s").Double(straggler.step_s);
  json.Key("median_step_s").Double(straggler.median_step_s);
  json.Key("excess_pct").Double(straggler.excess_pct);
  json.Key("module").String(straggler.module);
  json.Key("module_excess_s").Double(straggler.module_excess_s);
  json.Key("cause").String(straggler.cause == StragglerCause::kWaitedFor ? "waited_for"
                                                                         : "slower_step");
  json.Key("pass").String(PassKey(straggler.pass));
  json.Key("waited_s").Double(straggler.waited_s);
  json.EndObject();
}

const RankFigures* FiguresAt(const std::vector<RankFigures>& figures, int index) {
  return static_cast<size_t>(index) < figures.size() ? &figures[index] : nullptr;
}

}  // namespace

std::string RenderRanksText(const flopscope::v1::ListRanksResponse& ranks,
                            const std::vector<RankFigures>& figures) {
  TextTable table({"rank", "host", "pid", "device", "layout", "connected", "step", "fwd", "bwd",
                   "opt", "FLOPS", "MFU", "memory", "kernels", "lost", "slow"});
  std::set<std::string> gpu_statuses;
  for (int i = 0; i < ranks.ranks_size(); ++i) {
    const auto& rank = ranks.ranks(i);
    std::vector<std::string> row = {
        absl::StrCat(rank.rank()), rank.host().empty() ? "-" : rank.host(),
        absl::StrCat(rank.pid()),  Devices(rank),
        Coordinates(rank),         rank.connected() ? "yes" : "no"};
    std::vector<std::string> timing = FigureCells(FiguresAt(figures, i));
    row.insert(row.end(), timing.begin(), timing.end() - 1);
    row.push_back(absl::StrCat(rank.kernels()));
    row.push_back(absl::StrCat(LostRecords(rank)));
    row.push_back(timing.back());
    table.AddRow(std::move(row));
    if (rank.kernels() == 0 && !rank.gpu_status().empty()) gpu_statuses.insert(rank.gpu_status());
  }
  std::string text = table.Render();
  for (int i = 0; i < ranks.ranks_size(); ++i) {
    const RankFigures* rank_figures = FiguresAt(figures, i);
    if (rank_figures != nullptr && rank_figures->straggler &&
        rank_figures->straggler->cause == StragglerCause::kWaitedFor) {
      absl::StrAppend(&text, WaitedForLine(ranks.ranks(i).rank(), *rank_figures->straggler));
    }
  }
  std::vector<RankMemory> memory;
  for (const RankFigures& rank_figures : figures) {
    memory.insert(memory.end(), rank_figures.profile.memory.begin(),
                  rank_figures.profile.memory.end());
  }
  for (const std::string& line : MemoryFlagLines(memory)) {
    absl::StrAppend(&text, "Memory above its formula: ", line, "\n");
  }
  for (const std::string& status : gpu_statuses) {
    absl::StrAppend(&text, "No GPU records: ", PrintableForTerminal(status), "\n");
  }
  for (int i = 0; i < ranks.ranks_size(); ++i) {
    const auto& rank = ranks.ranks(i);
    if (const uint64_t unfinished = SessionsWithoutFinal(rank.losses()); unfinished > 0) {
      // The rank's own report says which of them a signal's drain was cut short in.
      const RankFigures* rank_figures = FiguresAt(figures, i);
      absl::StrAppend(
          &text, "Rank ", rank.rank(), ": ",
          SessionsWithoutFinalNote(unfinished, rank_figures == nullptr
                                                   ? SignalSessions{}
                                                   : rank_figures->profile.cut_short_signals),
          "\n");
    }
    if (rank.spooled_records() > 0) {
      absl::StrAppend(&text, "Rank ", rank.rank(), ": ", SpooledNote(rank.spooled_records()), "\n");
    }
  }
  for (int i = 0; i < ranks.ranks_size(); ++i) {
    const RankFigures* rank_figures = FiguresAt(figures, i);
    if (rank_figures != nullptr && !rank_figures->problem.empty()) {
      absl::StrAppend(&text, "Rank ", ranks.ranks(i).rank(),
                      ": no figures: ", PrintableForTerminal(rank_figures->problem), "\n");
    }
    if (rank_figures == nullptr) continue;
    for (const auto& [rank, note] : rank_figures->profile.left_alone_files) {
      absl::StrAppend(&text, "Rank ", rank, ": ", PrintableForTerminal(note), "\n");
    }
  }
  return text;
}

std::string RenderRanksJson(const flopscope::v1::ListRanksResponse& ranks,
                            const std::vector<RankFigures>& figures) {
  JsonWriter json;
  json.BeginObject().Key("ranks").BeginArray();
  for (int i = 0; i < ranks.ranks_size(); ++i) {
    const auto& rank = ranks.ranks(i);
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
    json.Key("sessions_without_final").Uint(SessionsWithoutFinal(rank.losses()));
    json.Key("gpu_status").String(rank.gpu_status());
    if (const RankFigures* rank_figures = FiguresAt(figures, i)) {
      WriteFiguresJson(*rank_figures, json);
    }
    json.EndObject();
  }
  json.EndArray().EndObject();
  return json.Finish();
}

}  // namespace flopscope::client
