#include "client/text/memory_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/text/human_format.h"
#include "client/text/text_table.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

std::string Bytes(double bytes) { return FormatBytes(static_cast<uint64_t>(std::llround(bytes))); }

std::string BytesOr(const std::optional<double>& bytes) { return bytes ? Bytes(*bytes) : "-"; }

std::string SetupCell(const RankMemory& memory) {
  if (memory.setup.empty()) return "-";
  std::string cell = PrintableForTerminal(SetupName(memory.setup));
  if (memory.dp > 1) absl::StrAppend(&cell, " dp=", memory.dp);
  return cell;
}

// A part's cell: its bytes held, "!" after a flagged one.
std::string PartCell(const MemoryPart& part) {
  return BytesOr(part.held) + (part.flagged ? " !" : "");
}

std::vector<std::string> Row(const RankMemory& memory) {
  std::vector<std::string> cells = {absl::StrCat(memory.rank), SetupCell(memory)};
  for (const char* name : kMemoryParts) {
    auto part = std::find_if(memory.parts.begin(), memory.parts.end(),
                             [&](const MemoryPart& each) { return each.name == name; });
    cells.push_back(part == memory.parts.end() ? "-" : PartCell(*part));
  }
  cells.push_back(BytesOr(memory.HeldTotal()));
  cells.push_back(BytesOr(memory.ExpectedTotal()));
  cells.push_back(BytesOr(memory.peak_allocated));
  cells.push_back(BytesOr(memory.peak_reserved));
  return cells;
}

// The rows shown: every rank up to kMemoryRowsShown, else the flagged ones and the ranks holding
// the least and the most.
std::vector<const RankMemory*> ShownRanks(const std::vector<RankMemory>& ranks) {
  std::vector<const RankMemory*> shown;
  for (const RankMemory& memory : ranks) shown.push_back(&memory);
  if (shown.size() <= kMemoryRowsShown) return shown;
  auto held = [](const RankMemory* memory) { return memory->HeldTotal().value_or(0); };
  auto [least, most] = std::minmax_element(shown.begin(), shown.end(),
                                           [&](auto* a, auto* b) { return held(a) < held(b); });
  const RankMemory* low = *least;
  const RankMemory* high = *most;
  shown.erase(std::remove_if(shown.begin(), shown.end(),
                             [&](const RankMemory* memory) {
                               return !memory->Flagged() && memory != low && memory != high;
                             }),
              shown.end());
  return shown;
}

// What the table could not show: the parts not measured, the CPU's peaks, the ledger's cost.
std::string Notes(const std::vector<RankMemory>& ranks) {
  std::string out;
  const bool unreachable_buckets = std::any_of(ranks.begin(), ranks.end(), [](auto& memory) {
    return memory.setup == "ddp" && !memory.bucket_view;
  });
  if (unreachable_buckets) {
    absl::StrAppend(&out,
                    "  buckets -: DDP's reducer keeps its gradient buckets in C++, out of "
                    "Python's reach; expected counts them (a copy of every gradient)\n");
  }
  std::vector<std::string> rss;
  std::vector<std::string> activations;
  bool any_peak = false;
  for (const RankMemory& memory : ranks) {
    any_peak = any_peak || memory.peak_allocated.has_value();
    if (memory.activations) {
      activations.push_back(absl::StrCat("rank ", memory.rank, " ", Bytes(*memory.activations)));
    }
    if (memory.rss_high_water) {
      rss.push_back(absl::StrCat("rank ", memory.rank, " ", Bytes(*memory.rss_high_water)));
    }
  }
  constexpr size_t kShown = 8;
  if (!activations.empty()) {
    if (activations.size() > kShown) {
      activations.resize(kShown);
      activations.push_back("...");
    }
    absl::StrAppend(&out,
                    "  activations the forward left allocated for backward (most of a step): ",
                    absl::StrJoin(activations, ", "), "\n");
  }
  if (!any_peak) {
    absl::StrAppend(&out, "  peaks: not measured on the CPU (the allocator's peaks are CUDA's)");
    if (!rss.empty()) {
      if (rss.size() > kShown) {
        rss.resize(kShown);
        rss.push_back("...");
      }
      absl::StrAppend(&out,
                      "; process RSS high-water (not tensor memory): ", absl::StrJoin(rss, ", "));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// Bytes that may be negative (a forward that freed more than it kept).
std::string SignedBytes(double bytes) { return bytes < 0 ? "-" + Bytes(-bytes) : Bytes(bytes); }

// The per-module activations: on a GPU a table of the modules whose forwards left the most (the
// most of any rank, with that rank and its step); on the CPU the line saying why there is none.
std::string ModuleActivations(const std::vector<RankMemory>& ranks) {
  struct Most {
    double bytes;
    int32_t rank;
    int64_t step;
  };
  std::map<std::string, Most> most;  // by path
  int64_t measured = 0;
  for (const RankMemory& memory : ranks) {
    measured = std::max(measured, memory.activation_modules);
    for (const ModuleActivation& module : memory.module_activations) {
      auto [it, added] =
          most.try_emplace(module.path, Most{module.bytes, memory.rank, memory.activations_step});
      if (!added && module.bytes > it->second.bytes) {
        it->second = {module.bytes, memory.rank, memory.activations_step};
      }
    }
  }
  if (most.empty()) {
    const bool gpu = std::any_of(ranks.begin(), ranks.end(),
                                 [](auto& memory) { return memory.peak_allocated.has_value(); });
    return gpu ? "" : absl::StrCat("  ", kActivationsCpuLine, "\n");
  }
  std::vector<std::pair<std::string, Most>> rows(most.begin(), most.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](auto& a, auto& b) { return a.second.bytes > b.second.bytes; });
  const size_t shown = std::min(rows.size(), kActivationRowsShown);
  TextTable table({"module", "forward left", "rank", "step"});
  for (size_t i = 0; i < shown; ++i) {
    const auto& [path, figure] = rows[i];
    table.AddRow({PrintableForTerminal(path), SignedBytes(figure.bytes), absl::StrCat(figure.rank),
                  absl::StrCat(figure.step)});
  }
  std::string out = absl::StrCat(
      "  Activations per module (GPU: memory_allocated() after its forward less before it, its "
      "children's included, summed over its calls in a measured step; the most of any rank):\n",
      table.Render("  "));
  if (static_cast<int64_t>(shown) < measured) {
    absl::StrAppend(&out, "  (", shown, " of ", measured, " modules shown)\n");
  }
  return out;
}

// "0-3, 5, 7-8" for sorted ranks.
std::string RankRanges(const std::vector<int32_t>& ranks) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    ranges.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ", ");
}

}  // namespace

std::vector<std::string> MemoryFlagLines(const std::vector<RankMemory>& ranks) {
  std::vector<std::pair<std::string, std::vector<int32_t>>> sentences;  // first seen first
  for (const RankMemory& memory : ranks) {
    for (const MemoryPart& part : memory.parts) {
      if (!part.flagged) continue;
      std::string sentence = MemoryFlagLine(memory, part);
      auto found = std::find_if(sentences.begin(), sentences.end(),
                                [&](const auto& entry) { return entry.first == sentence; });
      if (found == sentences.end()) {
        found = sentences.insert(sentences.end(), {std::move(sentence), {}});
      }
      found->second.push_back(memory.rank);
    }
  }
  std::vector<std::string> lines;
  for (auto& [sentence, holders] : sentences) {
    std::sort(holders.begin(), holders.end());
    lines.push_back(
        absl::StrCat(holders.size() == 1 ? "rank " : "ranks ", RankRanges(holders), " ", sentence));
  }
  return lines;
}

std::string MemoryFormula(const RankMemory& memory, const MemoryPart& part) {
  if (!part.expected) return "not in the formula";
  std::string formula = absl::StrCat(absl::StrFormat("%g", part.bytes_per_element), " B x ",
                                     FormatCount(memory.elements), " elements");
  if (part.divided) absl::StrAppend(&formula, " / dp ", memory.dp);
  return formula;
}

std::string MemoryFlagLine(const RankMemory& memory, const MemoryPart& part) {
  std::string line =
      absl::StrCat(part.name, ": ", BytesOr(part.held), " held, the ",
                   PrintableForTerminal(SetupName(memory.setup)), " formula expects ",
                   BytesOr(part.expected), " (", MemoryFormula(memory, part), ")");
  if (part.held && part.expected && *part.expected > 0) {
    absl::StrAppend(&line, absl::StrFormat(": %+.0f%%", (*part.held / *part.expected - 1) * 100));
  }
  return line;
}

std::string MemoryLedgerSection(const std::vector<RankMemory>& ranks) {
  if (ranks.empty()) return "";
  TextTable table({"rank", "setup", "params", "grads", "optimizer", "buckets", "held", "expected",
                   "peak allocated", "peak reserved"});
  const std::vector<const RankMemory*> shown = ShownRanks(ranks);
  for (const RankMemory* memory : shown) table.AddRow(Row(*memory));
  std::string out = absl::StrCat(
      "\nMemory per rank (what its tensors held at the end of an optimizer step, each storage "
      "once; expected: the formula for its setup, docs/design/memory-ledger.md; ! above it by "
      "more than ",
      std::llround(kMemoryMargin * 100), "%):\n", table.Render("  "));
  if (shown.size() < ranks.size()) {
    absl::StrAppend(&out, "  (", ranks.size(),
                    " ranks: the flagged ones, and those holding the "
                    "least and the most)\n");
  }
  for (const std::string& line : MemoryFlagLines(ranks)) absl::StrAppend(&out, "  ", line, "\n");
  absl::StrAppend(&out, Notes(ranks), ModuleActivations(ranks));
  return out;
}

namespace {

void OptionalNumber(JsonWriter& json, const char* key, const std::optional<double>& value) {
  json.Key(key);
  if (value) {
    json.Double(*value);
  } else {
    json.Null();
  }
}

void WriteModuleActivations(const RankMemory& memory, JsonWriter& json) {
  json.Key("module_activations");
  if (memory.activations_step < 0) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Key("step").Int(memory.activations_step);
  json.Key("modules").Int(memory.activation_modules);
  json.Key("rest").Double(memory.activations_rest);
  json.Key("top").BeginArray();
  for (const ModuleActivation& module : memory.module_activations) {
    json.BeginObject();
    json.Key("path").String(module.path);
    json.Key("bytes").Double(module.bytes);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

}  // namespace

void WriteMemoryJson(const RankMemory& memory, JsonWriter& json) {
  json.BeginObject();
  json.Key("rank").Int(memory.rank);
  json.Key("step").Int(memory.step);
  json.Key("setup").String(memory.setup);
  json.Key("setup_name").String(SetupName(memory.setup));
  json.Key("dp").Int(memory.dp);
  json.Key("elements").Double(memory.elements);
  json.Key("dtype").String(memory.dtype);
  json.Key("amp").Bool(memory.amp);
  json.Key("optimizer_states");
  if (memory.states) {
    json.Int(*memory.states);
  } else {
    json.Null();
  }
  json.Key("bucket_view").Bool(memory.bucket_view);
  json.Key("parts").BeginObject();
  for (const MemoryPart& part : memory.parts) {
    json.Key(part.name).BeginObject();
    OptionalNumber(json, "held", part.held);
    OptionalNumber(json, "expected", part.expected);
    json.Key("bytes_per_element").Double(part.bytes_per_element);
    json.Key("divided").Bool(part.divided);
    json.Key("flagged").Bool(part.flagged);
    json.EndObject();
  }
  json.EndObject();
  OptionalNumber(json, "held", memory.HeldTotal());
  OptionalNumber(json, "expected", memory.ExpectedTotal());
  json.Key("margin").Double(kMemoryMargin);
  json.Key("flagged").Bool(memory.Flagged());
  json.Key("flags").BeginArray();
  for (const MemoryPart& part : memory.parts) {
    if (part.flagged) json.String(MemoryFlagLine(memory, part));
  }
  json.EndArray();
  OptionalNumber(json, "rss_high_water", memory.rss_high_water);
  OptionalNumber(json, "cost_s", memory.cost_s);
  OptionalNumber(json, "peak_allocated", memory.peak_allocated);
  OptionalNumber(json, "peak_reserved", memory.peak_reserved);
  json.Key("peak_step");
  if (memory.peak_step >= 0) {
    json.Int(memory.peak_step);
  } else {
    json.Null();
  }
  OptionalNumber(json, "activations", memory.activations);
  json.Key("phase_peaks").BeginObject();
  for (const auto& [phase, bytes] : memory.phase_peaks) json.Key(phase).Double(bytes);
  json.EndObject();
  WriteModuleActivations(memory, json);
  json.EndObject();
}

std::string MemoryCell(const std::vector<RankMemory>& ranks) {
  if (ranks.empty() || ranks.front().setup.empty()) return "-";
  const RankMemory& memory = ranks.front();
  return absl::StrCat(BytesOr(memory.HeldTotal()), " / ", BytesOr(memory.ExpectedTotal()),
                      memory.Flagged() ? " !" : "");
}

}  // namespace flopscope::client
