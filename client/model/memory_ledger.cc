#include "client/model/memory_ledger.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace flopscope::client {
namespace {

constexpr char kLedgerPrefix[] = "memory_ledger ";
constexpr char kPeakPrefix[] = "memory_peak ";
constexpr char kActivationsPrefix[] = "memory_activations ";
// A `memory_activations` value longer than this is ignored (50 paths of ~300 bytes fit).
constexpr size_t kMaxActivationsValue = 32 * 1024;
// A mark's value is untrusted text: at most this many words are read.
constexpr size_t kMaxWords = 32;
// Adam's two states, where the hooks did not know the optimizer's class.
constexpr int kAssumedStates = 2;

// `name:value` words of a mark's value, the first kMaxWords.
absl::flat_hash_map<std::string, std::string> Words(const std::string& value) {
  absl::flat_hash_map<std::string, std::string> words;
  size_t count = 0;
  for (absl::string_view word : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
    if (++count > kMaxWords) break;
    const size_t colon = word.find(':');
    if (colon == absl::string_view::npos) continue;
    words[std::string(word.substr(0, colon))] = std::string(word.substr(colon + 1));
  }
  return words;
}

// A finite, non-negative number; absent for "-", a missing word or anything else.
std::optional<double> Number(const absl::flat_hash_map<std::string, std::string>& words,
                             const char* name) {
  auto it = words.find(name);
  double value = 0;
  if (it == words.end() || !absl::SimpleAtod(it->second, &value) || !std::isfinite(value) ||
      value < 0) {
    return std::nullopt;
  }
  return value;
}

std::string Text(const absl::flat_hash_map<std::string, std::string>& words, const char* name) {
  auto it = words.find(name);
  return it == words.end() ? "" : it->second;
}

// The rank after a key's prefix, or -1.
int32_t RankOf(const std::string& key, const char* prefix) {
  int32_t rank = -1;
  if (!absl::SimpleAtoi(key.substr(std::strlen(prefix)), &rank) || rank < 0) return -1;
  return rank;
}

void ReadLedger(const std::string& value, RankMemory& memory) {
  const auto words = Words(value);
  memory.step = static_cast<int64_t>(Number(words, "step").value_or(0));
  memory.setup = Text(words, "setup");
  memory.dp = std::max<int64_t>(static_cast<int64_t>(Number(words, "dp").value_or(1)), 1);
  memory.elements = Number(words, "elements").value_or(0);
  memory.dtype = Text(words, "dtype");
  memory.amp = Text(words, "amp") == "1";
  if (auto states = Number(words, "states")) memory.states = static_cast<int>(*states);
  memory.bucket_view = Text(words, "bucket_view") == "1";
  memory.parts.clear();
  for (const char* name : kMemoryParts) {
    MemoryPart part;
    part.name = name;
    part.held = Number(words, name);
    memory.parts.push_back(part);
  }
  memory.rss_high_water = Number(words, "rss_high_water");
  if (auto cost_us = Number(words, "cost_us")) memory.cost_s = *cost_us / 1e6;
}

void ReadPeak(const std::string& value, RankMemory& memory) {
  const auto words = Words(value);
  if (auto allocated = Number(words, "allocated");
      allocated && (!memory.peak_allocated || *allocated > *memory.peak_allocated)) {
    memory.peak_allocated = allocated;
    memory.peak_step = static_cast<int64_t>(Number(words, "step").value_or(-1));
  }
  if (auto reserved = Number(words, "reserved");
      reserved && (!memory.peak_reserved || *reserved > *memory.peak_reserved)) {
    memory.peak_reserved = reserved;
  }
  if (auto left = Number(words, "activations");
      left && (!memory.activations || *left > *memory.activations)) {
    memory.activations = left;
  }
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    if (auto peak = Number(words, phase)) {
      double& kept = memory.phase_peaks[phase];
      kept = std::max(kept, *peak);
    }
  }
}

// A module path as the hooks wrote it: `%25`, `%3D`, `%20` back to `%`, `=`, space.
std::string DecodePath(absl::string_view word) {
  std::string out;
  for (size_t i = 0; i < word.size(); ++i) {
    const absl::string_view code = word.substr(i + 1, 2);
    if (word[i] == '%' && (code == "25" || code == "3D" || code == "20")) {
      out += code == "25" ? '%' : code == "3D" ? '=' : ' ';
      i += 2;
    } else {
      out += word[i];
    }
  }
  return out;
}

// "<name>:<integer>" split at the last ':' (a path may hold one); false when malformed.
bool IntegerWord(absl::string_view word, absl::string_view& name, int64_t& value) {
  const size_t colon = word.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  name = word.substr(0, colon);
  return absl::SimpleAtoi(word.substr(colon + 1), &value);
}

// `step:<n> modules:<n> rest:<b> <path>:<b> ...` into `memory`, or nothing when any word is
// malformed, a count negative, or the value too long or naming too many paths.
void ReadActivations(const std::string& value, RankMemory& memory) {
  if (value.size() > kMaxActivationsValue) return;
  const std::vector<absl::string_view> words = absl::StrSplit(value, ' ', absl::SkipEmpty());
  if (words.size() < 3 || words.size() > 3 + kMaxActivationModules) return;
  int64_t header[3] = {0, 0, 0};
  constexpr const char* kHeader[] = {"step", "modules", "rest"};
  for (size_t i = 0; i < 3; ++i) {
    absl::string_view name;
    if (!IntegerWord(words[i], name, header[i]) || name != kHeader[i]) return;
  }
  if (header[0] < 0 || header[1] < static_cast<int64_t>(words.size() - 3)) return;
  std::vector<ModuleActivation> modules;
  for (size_t i = 3; i < words.size(); ++i) {
    absl::string_view path;
    int64_t bytes = 0;
    if (!IntegerWord(words[i], path, bytes)) return;
    modules.push_back({DecodePath(path), static_cast<double>(bytes)});
  }
  memory.activations_step = header[0];
  memory.activation_modules = header[1];
  memory.activations_rest = static_cast<double>(header[2]);
  memory.module_activations = std::move(modules);
}

// Bytes per element of a dtype's name; 4 where unknown.
double DtypeBytes(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "bf16") return 2;
  if (dtype == "fp64") return 8;
  return 4;
}

// The fp32 master copy per element the setup's optimizer keeps: DeepSpeed's at ZeRO stages 1-3
// (the ZeRO paper's K = 12 is Adam's two states and this copy; stage_1_and_2.py clones its
// partition into fp32 whatever the dtype; in fp32 training ZeRO-3 may share it with the
// parameters' partition, stage3.py, and is then below its formula), DeepSpeed without ZeRO only
// for fp16/bf16 parameters, none for torch's own optimizers, which update the parameters.
double MasterBytes(const RankMemory& memory) {
  if (memory.setup == "zero0") return memory.dtype == "fp32" ? 0 : 4;
  return absl::StartsWith(memory.setup, "zero") ? 4 : 0;
}

}  // namespace

std::optional<double> RankMemory::HeldTotal() const {
  std::optional<double> total;
  for (const MemoryPart& part : parts) {
    if (part.held) total = total.value_or(0) + *part.held;
  }
  return total;
}

std::optional<double> RankMemory::ExpectedTotal() const {
  std::optional<double> total;
  for (const MemoryPart& part : parts) {
    if (part.expected) total = total.value_or(0) + *part.expected;
  }
  return total;
}

bool RankMemory::Flagged() const {
  return std::any_of(parts.begin(), parts.end(),
                     [](const MemoryPart& part) { return part.flagged; });
}

std::string SetupName(const std::string& setup) {
  if (setup == "ddp") return "DDP";
  if (setup == "fsdp2") return "FSDP2";
  if (setup == "zero0") return "DeepSpeed without ZeRO";
  if (absl::StartsWith(setup, "zero")) return "ZeRO-" + setup.substr(4);
  if (setup == "single") return "one replica";
  return setup;
}

void ApplyFormulas(RankMemory& memory) {
  const double param_bytes = DtypeBytes(memory.dtype);
  const double states = 4.0 * memory.states.value_or(kAssumedStates);
  const bool zero = absl::StartsWith(memory.setup, "zero");
  const bool sharded_params = memory.setup == "zero3" || memory.setup == "fsdp2";
  const bool sharded_grads = sharded_params || memory.setup == "zero2";
  const bool sharded_states = sharded_grads || memory.setup == "zero1";
  for (MemoryPart& part : memory.parts) {
    if (part.name == "params") {
      // Mixed precision with torch's autocast: the fp32 parameters and their half copy.
      part.bytes_per_element = param_bytes + (memory.amp && !zero ? 2 : 0);
      part.divided = sharded_params;
    } else if (part.name == "grads") {
      part.bytes_per_element = param_bytes;
      part.divided = sharded_grads;
    } else if (part.name == "optimizer") {
      part.bytes_per_element = states + MasterBytes(memory);
      part.divided = sharded_states;
    } else if (memory.setup == "ddp") {  // buckets: DDP's hold a copy of every gradient
      part.bytes_per_element = memory.bucket_view ? 0 : param_bytes;
    } else {
      part.expected.reset();  // DeepSpeed's buckets hold a fixed element count: no formula
      part.flagged = false;
      continue;
    }
    part.expected = memory.elements * part.bytes_per_element / (part.divided ? memory.dp : 1);
    part.flagged = part.held && *part.held > *part.expected * (1 + kMemoryMargin) && *part.held > 0;
  }
}

bool IsMemoryLedgerKey(const std::string& key) {
  return absl::StartsWith(key, kLedgerPrefix) || absl::StartsWith(key, kPeakPrefix) ||
         absl::StartsWith(key, kActivationsPrefix);
}

std::vector<RankMemory> ReadMemoryLedger(
    const google::protobuf::RepeatedPtrField<flopscope::v1::Metadata>& metadata) {
  std::map<int32_t, RankMemory> by_rank;
  for (const flopscope::v1::Metadata& entry : metadata) {
    const std::string& key = entry.key();
    if (absl::StartsWith(key, kLedgerPrefix)) {
      const int32_t rank = RankOf(key, kLedgerPrefix);
      if (rank < 0) continue;
      RankMemory& memory = by_rank[rank];
      memory.rank = rank;
      ReadLedger(entry.value(), memory);  // the last measurement wins
    } else if (absl::StartsWith(key, kPeakPrefix)) {
      const int32_t rank = RankOf(key, kPeakPrefix);
      if (rank < 0) continue;
      RankMemory& memory = by_rank[rank];
      memory.rank = rank;
      ReadPeak(entry.value(), memory);
    } else if (absl::StartsWith(key, kActivationsPrefix)) {
      const int32_t rank = RankOf(key, kActivationsPrefix);
      if (rank < 0) continue;
      RankMemory& memory = by_rank[rank];
      memory.rank = rank;
      ReadActivations(entry.value(), memory);  // the last well-formed one wins
    }
  }
  std::vector<RankMemory> ranks;
  for (auto& [rank, memory] : by_rank) {
    if (!memory.setup.empty()) ApplyFormulas(memory);
    ranks.push_back(std::move(memory));
  }
  return ranks;
}

}  // namespace flopscope::client
