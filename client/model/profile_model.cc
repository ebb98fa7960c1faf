#include "client/model/profile_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/model/profile_flops.h"
#include "common/metadata_keys.h"
#include "common/nvtx_vocabulary.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::Report;

// One `module <path>=<index> [<parent path>]` mark: the module's place in model order.
struct AnnouncedModule {
  int64_t index = 0;
  std::string parent;  // "" for a root
};

// What frameworks announced through the metadata channel (the last value of a key wins).
struct Announced {
  std::optional<int64_t> batch_size;
  std::string precision;
  std::string estimated_precision;  // `estimated_precision=<p>`: the dtype the estimate ran in
  absl::flat_hash_map<std::string, std::string> class_by_path;
  absl::flat_hash_map<std::string, double> flops_by_path;
  absl::flat_hash_map<std::string, double> macs_by_path;
  absl::flat_hash_map<std::string, double> estimated_flops_by_path;
  absl::flat_hash_map<std::string, double> estimated_macs_by_path;
  absl::flat_hash_map<std::string, std::string> extra_repr_by_path;
  // `compiled <model path>=torch.compile`: modules whose submodules ran inside a compiled graph.
  std::vector<std::string> compiled_paths;
  // `deepspeed_differs <model path>=<why>`: where DeepSpeed's profiler prints other FLOPs.
  absl::flat_hash_map<std::string, std::string> deepspeed_differs_by_path;
  absl::flat_hash_map<std::string, double> params_by_path;
  // `params_shard <path>=<n> <rank>` (FSDP2's shards): what each rank holds of the module.
  absl::flat_hash_map<std::string, std::map<int32_t, double>> shards_by_path;
  // The module tree (`module <path>=<index> [<parent path>]`) and the `range_module` aliases
  // (model path -> the range path it ran under).
  absl::flat_hash_map<std::string, AnnouncedModule> tree;
  std::vector<std::string> tree_roots;  // as first announced
  absl::flat_hash_map<std::string, std::string> range_by_model_path;
};

// A mark value with `%25` / `%3D` written back as `%` / `=` (docs/marks.md: extra_repr).
std::string DecodeMarkValue(const std::string& value) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '%' && i + 2 < value.size()) {
      const std::string code = absl::AsciiStrToUpper(value.substr(i + 1, 2));
      if (code == "25" || code == "3D") {
        out += code == "25" ? '%' : '=';
        i += 2;
        continue;
      }
    }
    out += value[i];
  }
  return out;
}

// A mark's number: finite and not negative, else the mark is ignored ("1e400" reads as infinity).
void ReadPerPathNumber(const std::string& key, const std::string& text, const char* prefix,
                       absl::flat_hash_map<std::string, double>& into) {
  double value = 0;
  if (absl::SimpleAtod(text, &value) && std::isfinite(value) && value >= 0) {
    into[key.substr(std::strlen(prefix))] = value;
  }
}

// `module <path>=<index> <parent path>` (the parent path may hold spaces; a root has none).
void ReadModuleMark(const std::string& path, const std::string& value, Announced& announced) {
  const size_t space = value.find(' ');
  AnnouncedModule module;
  if (!absl::SimpleAtoi(value.substr(0, space), &module.index) || module.index < 0) return;
  if (space != std::string::npos) module.parent = value.substr(space + 1);
  if (module.parent.empty() && !announced.tree.contains(path)) {
    announced.tree_roots.push_back(path);
  }
  announced.tree[path] = module;
}

// `params_shard <path>=<n> <rank>`: rank's elements of the module (a rank 0 where none is said).
void ReadShardMark(const std::string& path, const std::string& value, Announced& announced) {
  const std::vector<std::string> words = absl::StrSplit(value, ' ');
  double held = 0;
  int32_t rank = 0;
  if (words.size() > 2 || !absl::SimpleAtod(words[0], &held) || !std::isfinite(held) || held < 0 ||
      (words.size() == 2 && (!absl::SimpleAtoi(words[1], &rank) || rank < 0))) {
    return;
  }
  announced.shards_by_path[path][rank] = held;
}

Announced ReadMetadata(const Report& report) {
  Announced announced;
  for (const auto& entry : report.metadata()) {
    const std::string& key = entry.key();
    if (key == "batch_size") {
      int64_t value = 0;
      if (absl::SimpleAtoi(entry.value(), &value) && value > 0) announced.batch_size = value;
    } else if (key == "precision") {
      announced.precision = absl::AsciiStrToLower(entry.value());
    } else if (key == "estimated_precision") {
      announced.estimated_precision = absl::AsciiStrToLower(entry.value());
    } else if (absl::StartsWith(key, "class ")) {
      announced.class_by_path[key.substr(6)] = entry.value();
    } else if (absl::StartsWith(key, "flops ")) {
      ReadPerPathNumber(key, entry.value(), "flops ", announced.flops_by_path);
    } else if (absl::StartsWith(key, "macs ")) {
      ReadPerPathNumber(key, entry.value(), "macs ", announced.macs_by_path);
    } else if (absl::StartsWith(key, "estimated_flops ")) {
      // The torch hooks' estimate (docs/marks.md): used where nothing was counted or announced.
      ReadPerPathNumber(key, entry.value(), "estimated_flops ", announced.estimated_flops_by_path);
    } else if (absl::StartsWith(key, "estimated_macs ")) {
      ReadPerPathNumber(key, entry.value(), "estimated_macs ", announced.estimated_macs_by_path);
    } else if (absl::StartsWith(key, "params ")) {
      ReadPerPathNumber(key, entry.value(), "params ", announced.params_by_path);
    } else if (absl::StartsWith(key, "module ")) {
      ReadModuleMark(key.substr(std::strlen("module ")), entry.value(), announced);
    } else if (absl::StartsWith(key, "range_module ")) {
      announced.range_by_model_path[entry.value()] = key.substr(std::strlen("range_module "));
    } else if (absl::StartsWith(key, "extra_repr ")) {
      announced.extra_repr_by_path[key.substr(std::strlen("extra_repr "))] =
          DecodeMarkValue(entry.value());
    } else if (absl::StartsWith(key, "params_shard ")) {
      ReadShardMark(key.substr(std::strlen("params_shard ")), entry.value(), announced);
    } else if (absl::StartsWith(key, "compiled ")) {
      std::string path = key.substr(std::strlen("compiled "));
      if (!absl::c_linear_search(announced.compiled_paths, path)) {
        announced.compiled_paths.push_back(std::move(path));
      }
    } else if (absl::StartsWith(key, "deepspeed_differs ")) {
      announced.deepspeed_differs_by_path[key.substr(std::strlen("deepspeed_differs "))] =
          DecodeMarkValue(entry.value());
    }
  }
  return announced;
}

// The compiled module (`compiled` marks) whose graph `model_path` ran inside: its nearest
// compiled ancestor's path, "" when it has none.
std::string CompiledAncestor(const Announced& announced, const std::string& model_path) {
  std::string found;
  for (const std::string& compiled : announced.compiled_paths) {
    if (model_path.size() > compiled.size() && absl::StartsWith(model_path, compiled) &&
        model_path[compiled.size()] == '/' && compiled.size() > found.size()) {
      found = compiled;
    }
  }
  return found;
}

const PhaseStats* FindPhase(const Report& report, const std::string& name) {
  for (const PhaseStats& phase : report.phases()) {
    if (phase.name() == name) return &phase;
  }
  return nullptr;
}

// A phase's latency per step: the daemon's median over the uncounted steps, or the mean per
// occurrence from a daemon that sends no median.
Figure PhaseLatency(const Report& report, const std::string& name) {
  const PhaseStats* phase = FindPhase(report, name);
  if (phase == nullptr) return {std::nullopt, absl::StrCat("no '", name, "' phase marked")};
  if (phase->calls() == 0) {
    return {std::nullopt, absl::StrCat("every '", name, "' ran in a counted step")};
  }
  if (phase->median_ns() > 0) return {static_cast<double>(phase->median_ns()) / 1e9, ""};
  return {static_cast<double>(phase->cpu_time_ns()) / phase->calls() / 1e9, ""};
}

// Gradient accumulation: the `forward` phases of a usual step, the daemon's most frequent count
// over the window's steps (a short last step, or forwards outside every step such as an
// evaluation, leave it alone). From a daemon that does not send it: the forward phases over the
// steps where they divide evenly, else 1. 1 without steps or forward phases.
uint32_t MicroBatchesPerStep(const Report& report, const Profile& profile) {
  const PhaseStats* forward = FindPhase(report, kForwardPhase);
  if (forward == nullptr || profile.steps == 0) return 1;
  if (forward->occurrences_per_step() > 0) return forward->occurrences_per_step();
  const PhaseStats* step = FindPhase(report, kStepRange);
  if (step == nullptr || step->calls() == 0 || forward->calls() % step->calls() != 0) return 1;
  return static_cast<uint32_t>(std::max<uint64_t>(forward->calls() / step->calls(), 1));
}

// With k micro-batches per step, the model's rows (the first model_end) are one micro-batch's:
// every per-step figure / k, as DeepSpeed's tree shows one forward. Roots outside the model (the
// loss, the optimizer) stay per step; ratios (FLOPS, flops_disagree) do not change.
void RowsPerMicroBatch(Profile& profile) {
  if (profile.micro_batches <= 1) return;
  const double k = profile.micro_batches;
  for (size_t i = 0; i < profile.model_end && i < profile.modules.size(); ++i) {
    ModuleRow& row = profile.modules[i];
    for (std::optional<double>* figure :
         {&row.flops, &row.all_passes_flops, &row.bwd_flops, &row.announced_flops,
          &row.estimated_flops, &row.macs, &row.bwd_latency_s, &row.latency_min_s,
          &row.latency_max_s}) {
      if (*figure) **figure /= k;
    }
    row.latency_s /= k;
    row.all_passes_latency_s /= k;
    for (PrecisionFlops& entry : row.flops_by_precision) entry.flops /= k;
  }
}

bool PhasesHaveMedians(const Report& report) {
  return std::any_of(report.phases().begin(), report.phases().end(),
                     [](const PhaseStats& phase) { return phase.median_ns() > 0; });
}

StepScope StepScopeOf(const Report& report) {
  StepScope scope;
  if (!report.has_steps()) {
    // A daemon that sends no step window: the `step` phase's uncounted occurrences.
    const PhaseStats* step = FindPhase(report, kStepRange);
    scope.uncounted_steps = step == nullptr ? 0 : step->calls();
    return scope;
  }
  scope.window = report.steps().requested();
  scope.first_step = report.steps().first_step();
  scope.last_step = report.steps().last_step();
  scope.uncounted_steps = report.steps().uncounted_steps();
  scope.counted_steps.assign(report.steps().counted_steps().begin(),
                             report.steps().counted_steps().end());
  scope.unfinished_steps.assign(report.steps().unfinished_steps().begin(),
                                report.steps().unfinished_steps().end());
  if (report.steps().has_step_period() && report.steps().step_period().median_ns() > 0) {
    scope.step_period_s = static_cast<double>(report.steps().step_period().median_ns()) / 1e9;
  }
  return scope;
}

// "3-4" for steps {3, 4}, "3, 7" for {3, 7}.
std::string StepList(const std::vector<int64_t>& steps) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < steps.size();) {
    size_t end = i;
    while (end + 1 < steps.size() && steps[end + 1] == steps[end] + 1) ++end;
    runs.push_back(end == i ? absl::StrCat(steps[i]) : absl::StrCat(steps[i], "-", steps[end]));
    i = end + 1;
  }
  return absl::StrJoin(runs, ", ");
}

// Which figures are medians and over which steps, for the summary's "Latencies:" line.
std::string LatencyBasis(const Report& report, const Profile& profile) {
  const StepScope& scope = profile.step_scope;
  const std::string ranks = profile.ranks > 1 ? absl::StrCat(" of ", profile.ranks, " ranks") : "";
  std::string basis;
  if (scope.window) {
    basis = absl::StrCat("medians per step over the ", scope.uncounted_steps, " uncounted steps",
                         ranks, " (modules: min and max in the table below)");
  } else if (report.phases().empty()) {
    basis = "no step or phase marked: module latencies are their totals over the run";
  } else if (!PhasesHaveMedians(report)) {
    basis = "means (the daemon sent no medians)";
  } else if (profile.steps == 0) {
    basis = "fwd/bwd/step: medians per occurrence (no step marked); modules: totals over the run";
  } else {
    basis = absl::StrCat("fwd/bwd/step/iter: medians per step over the ", scope.uncounted_steps,
                         " uncounted steps", ranks,
                         "; modules: their total over those steps / steps (--steps A:B for "
                         "medians)");
  }
  if (!scope.counted_steps.empty()) {
    absl::StrAppend(&basis,
                    "; counted steps left out (replay-slowed): ", StepList(scope.counted_steps));
  }
  return basis;
}

// Ranks of the lowest data-parallel replica included: the daemon sums params over them.
int RanksOfFirstReplica(const Report& report) {
  if (report.ranks().empty()) return 1;
  uint32_t lowest = UINT32_MAX;
  for (const auto& rank : report.ranks()) lowest = std::min(lowest, rank.layout().dp_rank());
  int count = 0;
  for (const auto& rank : report.ranks()) count += rank.layout().dp_rank() == lowest ? 1 : 0;
  return std::max(count, 1);
}

int DistinctReplicas(const Report& report) {
  std::set<uint32_t> replicas;
  for (const auto& rank : report.ranks()) replicas.insert(rank.layout().dp_rank());
  return std::max<int>(static_cast<int>(replicas.size()), 1);
}

void FillLayout(const Report& report, Profile& profile) {
  profile.ranks = std::max(report.ranks_size(), 1);
  profile.world_size = profile.ranks;
  for (const auto& unreadable : report.unreadable_ranks()) {
    profile.unreadable_ranks.emplace_back(unreadable.rank(), unreadable.problem());
  }
  for (const auto& left_alone : report.left_alone_files()) {
    profile.left_alone_files.emplace_back(left_alone.rank(), left_alone.problem());
  }
  if (report.ranks().empty()) return;
  const auto& first = report.ranks(0);
  profile.world_size = std::max(first.world_size(), profile.ranks);
  const auto& layout = first.layout();
  profile.mp_size =
      static_cast<int>(std::max(layout.tp_size(), 1u) * std::max(layout.pp_size(), 1u));
  profile.dp_size = layout.dp_size() > 0 ? static_cast<int>(layout.dp_size())
                                         : std::max(profile.world_size / profile.mp_size, 1);
  for (const auto& rank : report.ranks()) {
    if (!rank.devices().empty() && !rank.devices(0).name().empty()) {
      profile.device = rank.devices(0).name();
      break;
    }
  }
}

// Forward latency from the module's forward ranges (0 when it never ran forward), backward
// latency from its backward ranges: the daemon's medians per step over the window.
void SetPassLatencies(const ModuleStats& module, ModuleRow& row) {
  const flopscope::v1::StepLatency& forward = module.fwd_step_latency();
  row.latency_s = static_cast<double>(forward.median_ns()) / 1e9;
  row.latency_min_s.reset();
  row.latency_max_s.reset();
  if (module.has_fwd_step_latency()) {
    row.latency_is_gpu = forward.gpu();
    row.latency_min_s = static_cast<double>(forward.min_ns()) / 1e9;
    row.latency_max_s = static_cast<double>(forward.max_ns()) / 1e9;
  }
  if (module.has_bwd_step_latency()) {
    row.bwd_latency_s = static_cast<double>(module.bwd_step_latency().median_ns()) / 1e9;
  }
}

ModuleRow RowFor(const ModuleStats& module, const Announced& announced, double divisor,
                 int params_divisor, bool step_window, int counted_ranks, bool passes) {
  ModuleRow row;
  row.path = module.path();
  row.name = module.name();
  row.depth = module.depth();
  auto named = announced.class_by_path.find(module.path());
  row.class_name =
      named != announced.class_by_path.end() ? named->second : ClassFromName(module.name());
  if (module.has_params()) row.params = static_cast<double>(module.params()) / params_divisor;
  if (auto extra = announced.extra_repr_by_path.find(module.path());
      extra != announced.extra_repr_by_path.end()) {
    row.extra_repr = extra->second;
  }
  const auto announced_flops = announced.flops_by_path.find(module.path());
  if (module.has_flops()) {
    SetCountedFlops(module, counted_ranks, passes, row);  // per counted step already
    if (announced_flops != announced.flops_by_path.end() && row.flops) {
      row.announced_flops = announced_flops->second;
      row.flops_disagree = std::abs(*row.flops - announced_flops->second) >
                           kAnnouncedFlopsTolerance * std::abs(announced_flops->second);
    }
  } else if (announced_flops != announced.flops_by_path.end()) {
    row.flops = announced_flops->second;
    row.flops_announced = true;
  } else if (auto estimated = announced.estimated_flops_by_path.find(module.path());
             estimated != announced.estimated_flops_by_path.end()) {
    row.flops = estimated->second;
    row.flops_announced = true;
    row.flops_estimated = true;
  }
  if (auto estimated = announced.estimated_flops_by_path.find(module.path());
      !row.flops_estimated && estimated != announced.estimated_flops_by_path.end()) {
    row.estimated_flops = estimated->second;  // shown beside the measured or announced figure
  }
  const auto estimated_macs = announced.estimated_macs_by_path.find(module.path());
  if (auto macs = announced.macs_by_path.find(module.path());
      macs != announced.macs_by_path.end()) {
    row.macs = macs->second;
  } else if (row.flops_estimated && estimated_macs != announced.estimated_macs_by_path.end()) {
    row.macs = estimated_macs->second;
  } else if (row.flops) {
    row.macs = *row.flops / 2;
  }
  row.latency_is_gpu = module.has_gpu_time_ns();
  const double time_ns =
      static_cast<double>(module.has_gpu_time_ns() ? module.gpu_time_ns() : module.cpu_time_ns());
  row.latency_s = time_ns / divisor / 1e9;
  if (step_window) {
    // The daemon's median per step over the window (per GPU: the ranks' steps are pooled).
    const flopscope::v1::StepLatency& step = module.step_latency();
    row.latency_s = static_cast<double>(step.median_ns()) / 1e9;
    if (module.has_step_latency()) {
      row.latency_is_gpu = step.gpu();
      row.latency_min_s = static_cast<double>(step.min_ns()) / 1e9;
      row.latency_max_s = static_cast<double>(step.max_ns()) / 1e9;
    }
    row.all_passes_latency_s = row.latency_s;
    if (passes) SetPassLatencies(module, row);
  }
  if (!step_window) row.all_passes_latency_s = row.latency_s;
  row.kernels = module.kernels();
  return row;
}

// The rows in the announced model order (docs/marks.md: the module tree): every announced
// module once, a zero-latency row where it never ran (containers, unused modules), the
// daemon's rows under their model path's place (through `range_module` aliases), unannounced
// rows under their range parent, and the rest (other roots, <unattributed>) after.
class TreeMerge {
 public:
  using RowMaker = std::function<ModuleRow(const ModuleStats&)>;

  TreeMerge(const Announced& announced, std::vector<ModuleRow> rows, RowMaker make_row)
      : announced_(announced), rows_(std::move(rows)), make_row_(std::move(make_row)) {
    placed_.assign(rows_.size(), false);
    for (size_t i = 0; i < rows_.size(); ++i) {
      row_by_path_.emplace(rows_[i].path, i);
      const size_t slash = rows_[i].path.rfind('/');
      if (slash != std::string::npos) range_children_[rows_[i].path.substr(0, slash)].push_back(i);
    }
    for (const auto& [path, module] : announced_.tree) {
      claimed_.insert(RangePathOf(path));
      if (!module.parent.empty() && announced_.tree.contains(module.parent)) {
        children_[module.parent].push_back(path);
      }
    }
    for (auto& [parent, children] : children_) {
      std::sort(children.begin(), children.end(), [&](const std::string& a, const std::string& b) {
        const int64_t ia = announced_.tree.at(a).index, ib = announced_.tree.at(b).index;
        return ia != ib ? ia < ib : a < b;
      });
    }
  }

  std::vector<ModuleRow> Merge() {
    for (const std::string& root : announced_.tree_roots) EmitAnnounced(root, 0);
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (!placed_[i] && rows_[i].depth == 0) EmitUnannounced(i, 0);
    }
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (!placed_[i]) out_.push_back(rows_[i]);  // orphans keep their depth
    }
    return std::move(out_);
  }

 private:
  static constexpr uint32_t kMaxDepth = 256;  // marks are producer text: no runaway recursion

  std::string RangePathOf(const std::string& model_path) const {
    auto alias = announced_.range_by_model_path.find(model_path);
    return alias == announced_.range_by_model_path.end() ? model_path : alias->second;
  }

  // "layers.0" under the ModuleList "layers" is "(0)", as print(model) has it.
  static std::string RelativeName(const std::string& path, const std::string& parent) {
    const std::string name = path.substr(path.rfind('/') + 1);
    if (parent.empty() || absl::StartsWith(path, parent + "/")) return name;
    const std::string parent_name = parent.substr(parent.rfind('/') + 1);
    if (absl::StartsWith(name, parent_name + ".")) return name.substr(parent_name.size() + 1);
    return name;
  }

  void EmitAnnounced(const std::string& model_path, uint32_t depth) {
    if (depth > kMaxDepth) return;
    const std::string range = RangePathOf(model_path);
    ModuleRow row;
    if (auto found = row_by_path_.find(range);
        found != row_by_path_.end() && !placed_[found->second]) {
      placed_[found->second] = true;
      row = rows_[found->second];
    } else {
      ModuleStats never_ran;  // zero latency, no kernels
      never_ran.set_path(model_path);
      never_ran.set_name(model_path.substr(model_path.rfind('/') + 1));
      row = make_row_(never_ran);
      row.never_ran = true;
    }
    row.depth = depth;
    row.model_path = model_path;
    row.name = RelativeName(model_path, announced_.tree.at(model_path).parent);
    if (auto named = announced_.class_by_path.find(model_path);
        named != announced_.class_by_path.end()) {
      row.class_name = named->second;
    }
    if (auto extra = announced_.extra_repr_by_path.find(model_path);
        extra != announced_.extra_repr_by_path.end()) {
      row.extra_repr = extra->second;
    }
    if (auto params = announced_.params_by_path.find(model_path);
        !row.params && params != announced_.params_by_path.end()) {
      row.params = params->second;
    }
    out_.push_back(std::move(row));
    for (const std::string& child : children_[model_path]) EmitAnnounced(child, depth + 1);
    EmitRangeChildren(range, depth + 1);
  }

  void EmitUnannounced(size_t index, uint32_t depth) {
    if (depth > kMaxDepth) return;
    placed_[index] = true;
    out_.push_back(rows_[index]);
    out_.back().depth = depth;
    EmitRangeChildren(rows_[index].path, depth + 1);
  }

  void EmitRangeChildren(const std::string& range_path, uint32_t depth) {
    auto children = range_children_.find(range_path);
    if (children == range_children_.end()) return;
    for (size_t i : children->second) {
      if (!placed_[i] && !claimed_.contains(rows_[i].path)) EmitUnannounced(i, depth);
    }
  }

  const Announced& announced_;
  std::vector<ModuleRow> rows_;
  RowMaker make_row_;
  std::vector<bool> placed_;
  std::vector<ModuleRow> out_;
  absl::flat_hash_map<std::string, size_t> row_by_path_;
  absl::flat_hash_map<std::string, std::vector<size_t>> range_children_;  // by range parent
  absl::flat_hash_map<std::string, std::vector<std::string>> children_;   // by model parent
  absl::flat_hash_set<std::string> claimed_;  // range paths of announced modules
};

// A module with no announced params gets the sum of its children's (a ModuleList's, say);
// children come after their parent, so a backward pass fills the deepest first.
void SumChildParams(std::vector<ModuleRow>& modules) {
  for (size_t i = modules.size(); i-- > 0;) {
    ModuleRow& row = modules[i];
    if (row.params) continue;
    std::optional<double> sum;
    for (size_t j = i + 1; j < modules.size() && modules[j].depth > row.depth; ++j) {
      if (modules[j].depth == row.depth + 1 && modules[j].params) {
        sum = sum.value_or(0) + *modules[j].params;
      }
    }
    row.params = sum;
    row.params_from_children = sum.has_value();
  }
}

// A module that never ran itself (a ModuleList, a ModuleDict) shows its children's figures, as
// DeepSpeed's get_module_duration / get_module_macs / get_module_flops add them up for a module
// with none of its own; deepest first, as for params. Such a module with children is a
// container; its latency is its children's sum (figures_from_children) when one of them ran.
void SumChildFigures(std::vector<ModuleRow>& modules) {
  for (size_t i = modules.size(); i-- > 0;) {
    ModuleRow& row = modules[i];
    if (!row.never_ran) continue;
    const bool sum_latency = row.latency_s <= 0;
    const bool sum_flops = !row.flops;
    for (size_t j = i + 1; j < modules.size() && modules[j].depth > row.depth; ++j) {
      const ModuleRow& child = modules[j];
      if (child.depth != row.depth + 1) continue;
      row.container = true;
      if (sum_latency) {
        row.figures_from_children |= !child.never_ran || child.figures_from_children;
        row.latency_s += child.latency_s;
        if (child.bwd_latency_s)
          row.bwd_latency_s = row.bwd_latency_s.value_or(0) + *child.bwd_latency_s;
      }
      if (!sum_flops) continue;
      if (child.macs) row.macs = row.macs.value_or(0) + *child.macs;
      if (!child.flops) continue;
      row.flops = row.flops.value_or(0) + *child.flops;
      row.flops_announced |= child.flops_announced;
      row.flops_estimated |= child.flops_estimated;
    }
  }
}

// The model is the root with the most params (else the longest latency); its subtree moves to
// the front. Returns the index one past its subtree (0 when there is no root).
size_t PutModelFirst(std::vector<ModuleRow>& modules) {
  std::vector<std::pair<size_t, size_t>> roots;  // [begin, end) of each root's subtree
  for (size_t i = 0; i < modules.size(); ++i) {
    if (modules[i].depth == 0)
      roots.push_back({i, i + 1});
    else if (!roots.empty())
      roots.back().second = i + 1;
  }
  std::optional<size_t> best;
  for (size_t r = 0; r < roots.size(); ++r) {
    const ModuleRow& row = modules[roots[r].first];
    if (row.path == kUnattributed) continue;
    if (!best) {
      best = r;
      continue;
    }
    const ModuleRow& held = modules[roots[*best].first];
    const double params = row.params.value_or(0), held_params = held.params.value_or(0);
    if (params > held_params || (params == held_params && row.latency_s > held.latency_s)) best = r;
  }
  if (!best) return 0;
  const auto [begin, end] = roots[*best];
  std::rotate(modules.begin(), modules.begin() + static_cast<std::ptrdiff_t>(begin),
              modules.begin() + static_cast<std::ptrdiff_t>(end));
  return end - begin;
}

// Sums a figure over the top-level modules of the model (the first `end` rows; all of them
// when no model was picked); nullopt when none of them has it.
template <typename Getter>
std::optional<double> SumOverRoots(const std::vector<ModuleRow>& modules, Getter get,
                                   size_t end = 0) {
  std::optional<double> sum;
  if (end == 0) end = modules.size();
  for (size_t i = 0; i < end && i < modules.size(); ++i) {
    const ModuleRow& row = modules[i];
    if (row.depth != 0 || row.path == kUnattributed) continue;
    if (std::optional<double> value = get(row)) sum = sum.value_or(0) + *value;
  }
  return sum;
}

// Where the summary's fwd flops come from: "measured" from a counted forward phase, else the
// sources of the model's top-level rows joined ("measured + estimated" where they mix); "" when
// there are none.
std::string FwdFlopsSource(const Profile& profile) {
  if (!profile.fwd_flops_per_gpu.value) return "";
  if (absl::StartsWith(profile.fwd_flops_per_gpu.note, "measured")) return "measured";
  bool seen[3] = {false, false, false};
  const char* kSources[3] = {"measured", "announced", "estimated"};
  const size_t end = profile.model_end == 0 ? profile.modules.size() : profile.model_end;
  for (size_t i = 0; i < end && i < profile.modules.size(); ++i) {
    const ModuleRow& row = profile.modules[i];
    if (row.depth != 0 || row.path == kUnattributed) continue;
    const std::string source = FlopsSourceOf(row);
    for (int k = 0; k < 3; ++k) seen[k] = seen[k] || source == kSources[k];
  }
  std::vector<std::string> sources;
  for (int k = 0; k < 3; ++k) {
    if (seen[k]) sources.push_back(kSources[k]);
  }
  return absl::StrJoin(sources, " + ");
}

// The fwd flops and MACs per GPU say where they come from (a measured phase says so already).
void TagFlopsSource(Profile& profile) {
  const std::string& source = profile.fwd_flops_source;
  for (Figure* figure : {&profile.fwd_flops_per_gpu, &profile.fwd_macs_per_gpu}) {
    if (figure->value && figure->note.empty()) figure->note = source;
  }
}

// "measured", "estimated; estimate: per GPU x mp_size, as DeepSpeed", or why there are none.
std::string ModelFlopsNote(const std::string& source, const Figure& model) {
  if (!model.value || source.empty()) return model.note;
  if (model.note.empty() || absl::StartsWith(model.note, "measured")) return source;
  return absl::StrCat(source, "; ", model.note);
}

void FillSummaryFigures(const Report& report, Profile& profile) {
  const int replica_ranks = RanksOfFirstReplica(report);
  const bool whole_replicas = replica_ranks == profile.mp_size &&
                              profile.ranks == DistinctReplicas(report) * profile.mp_size;
  profile.params_per_gpu.value = SumOverRoots(
      profile.modules, [](const ModuleRow& row) { return row.params; }, profile.model_end);
  if (!profile.params_per_gpu.value) profile.params_per_gpu.note = "no params announced";
  profile.fwd_flops_per_gpu.value = SumOverRoots(
      profile.modules, [](const ModuleRow& row) { return row.flops; }, profile.model_end);
  if (!profile.fwd_flops_per_gpu.value) profile.fwd_flops_per_gpu.note = profile.flops_source;
  profile.fwd_macs_per_gpu.value = SumOverRoots(
      profile.modules, [](const ModuleRow& row) { return row.macs; }, profile.model_end);
  if (!profile.fwd_macs_per_gpu.value) profile.fwd_macs_per_gpu.note = profile.flops_source;
  MeasurePhaseFlops(report, profile);
  profile.fwd_flops_source = FwdFlopsSource(profile);
  TagFlopsSource(profile);

  const char* model_note =
      whole_replicas || profile.mp_size == 1 ? "" : "estimate: per GPU x mp_size, as DeepSpeed";
  profile.params_of_model = profile.params_per_gpu;
  profile.fwd_flops_of_model = profile.fwd_flops_per_gpu;
  for (Figure* model : {&profile.params_of_model, &profile.fwd_flops_of_model}) {
    if (model->value) {
      *model->value *= profile.mp_size;
      model->note = model_note;
    }
  }
  profile.fwd_flops_of_model.note =
      ModelFlopsNote(profile.fwd_flops_source, profile.fwd_flops_of_model);

  profile.fwd_latency_s = PhaseLatency(report, kForwardPhase);
  if (FindPhase(report, kForwardPhase) == nullptr) {
    std::optional<double> roots = SumOverRoots(
        profile.modules, [](const ModuleRow& row) { return row.latency_s; }, profile.model_end);
    if (roots) profile.fwd_latency_s = {roots, "top-level modules (no 'forward' phase marked)"};
  }
  profile.bwd_latency_s = PhaseLatency(report, kBackwardPhase);
  profile.step_latency_s = PhaseLatency(report, kOptimizerPhase);
  profile.measured_step_range_s = PhaseLatency(report, kStepRange);
  profile.iter_latency_s = profile.measured_step_range_s;
  if (profile.fwd_latency_s.value && profile.bwd_latency_s.value) {
    // DeepSpeed's definition: fwd + bwd + step, whatever the step range measured; with
    // gradient accumulation the optimizer step's k forwards and k backwards, as DeepSpeed's
    // timers hold them at the accumulation boundary where it prints.
    profile.iter_latency_s = {*profile.fwd_latency_s.value + *profile.bwd_latency_s.value +
                                  profile.step_latency_s.value.value_or(0),
                              ""};
  }
  if (profile.micro_batches > 1) {
    // One micro-batch's forward and backward, as DeepSpeed's profiler times one forward.
    for (Figure* latency : {&profile.fwd_latency_s, &profile.bwd_latency_s}) {
      if (latency->value) *latency->value /= profile.micro_batches;
    }
  }
}

// Each rank's GPU status and, when no rank recorded GPU work, why in one phrase: the ranks'
// common reason, or a pointer to the per-rank list where they differ.
void FillGpuStatus(const Report& report, Profile& profile) {
  std::set<std::string> reasons;
  for (const auto& rank : report.ranks()) {
    if (rank.sessions() > 1) profile.merged_sessions.emplace_back(rank.rank(), rank.sessions());
    profile.gpu_status.emplace_back(rank.rank(), rank.gpu_status());
    reasons.insert(rank.gpu_status());
  }
  const bool gpu = std::any_of(report.ranks().begin(), report.ranks().end(),
                               [](const auto& rank) { return rank.kernels() > 0; });
  if (gpu) return;
  reasons.erase("");
  if (reasons.empty()) {
    profile.no_gpu_why = "no GPU records; the ranks did not say why";
  } else if (reasons.size() == 1 && profile.gpu_status.size() >= 1 &&
             std::all_of(profile.gpu_status.begin(), profile.gpu_status.end(),
                         [&](const auto& entry) { return entry.second == *reasons.begin(); })) {
    profile.no_gpu_why = *reasons.begin();
  } else {
    profile.no_gpu_why = "no GPU records; the ranks differ (GPU status per rank below)";
  }
}

std::string FlopsSource(const std::vector<ModuleRow>& modules, const Report& report,
                        const Profile& profile) {
  bool counted = false;
  bool announced = false;
  bool estimated = false;
  for (const ModuleRow& row : modules) {
    counted |= row.flops.has_value() && !row.flops_announced;
    announced |= row.flops_announced && !row.flops_estimated;
    estimated |= row.flops_estimated;
  }
  if (counted) {
    return announced || estimated ? "counted (announced or estimated where not counted)"
                                  : "counted";
  }
  if (announced) return "announced by the framework (not measured)";
  if (estimated) {
    return "estimated from shapes by the framework (estimated_flops marks; not measured)";
  }
  const bool gpu = std::any_of(report.ranks().begin(), report.ranks().end(),
                               [](const auto& rank) { return rank.kernels() > 0; });
  // A torch.compile graph runs none of the functions the estimate wraps (docs/pytorch.md).
  const auto compiled = std::find_if(modules.begin(), modules.end(), [](const ModuleRow& row) {
    return !row.inside_compiled.empty();
  });
  if (!gpu && compiled != modules.end()) {
    return absl::StrCat("no FLOPs: ", compiled->inside_compiled,
                        " ran as a torch.compile graph, which the torch hooks' estimate does not "
                        "see (counters on a GPU do: FLOPSCOPE_COUNTERS); ",
                        profile.no_gpu_why);
  }
  if (!gpu) return absl::StrCat("no FLOPs: ", profile.no_gpu_why);
  return absl::StrCat("no FLOPs counted: no counter window yet (open one: flopscope profile ",
                      report.job_id(), " --count N)");
}

}  // namespace

std::string PartialRanksLine(const Profile& profile) {
  std::string line;
  if (profile.ranks < profile.world_size || !profile.unreadable_ranks.empty()) {
    line = absl::StrCat(profile.ranks, " of ", profile.world_size,
                        " ranks reported (the figures cover those ranks only)");
  }
  for (const auto& [rank, problem] : profile.unreadable_ranks) {
    absl::StrAppend(&line, "; left out, unreadable: rank ", rank, ": ", problem);
  }
  for (const auto& [rank, note] : profile.left_alone_files) {
    absl::StrAppend(&line, line.empty() ? "" : "; ", "rank ", rank, ": ", note);
  }
  return line;
}

std::string MergedSessionsLine(const Profile& profile) {
  if (profile.merged_sessions.empty()) return "";
  std::vector<std::string> ranks;
  for (const auto& [rank, sessions] : profile.merged_sessions) {
    ranks.push_back(absl::StrCat("rank ", rank, " has ", sessions, " sessions"));
  }
  return absl::StrCat(absl::StrJoin(ranks, ", "),
                      ": a restart, or a second run recorded into the same job id (--append, or "
                      "without flopscope run), merged here (give each run its own --job to keep "
                      "them apart)");
}

std::string NoRangeNote(const ModuleRow& row) {
  if (!row.never_ran) return "";
  if (!row.inside_compiled.empty()) {
    return absl::StrCat("ran inside ", row.inside_compiled,
                        "'s torch.compile graph: no range or estimate of its own");
  }
  if (row.figures_from_children) {
    return "container: no range of its own; its latency is its children's sum";
  }
  if (row.container) return "never ran: a container none of whose modules ran";
  return "never ran: an unused module";
}

std::string FlopsSourceOf(const ModuleRow& row) {
  if (!row.flops) return "";
  if (row.flops_estimated) return "estimated";
  return row.flops_announced ? "announced" : "measured";
}

std::string MeasuredFlopsHint(const Profile& profile) {
  const bool counted =
      std::any_of(profile.modules.begin(), profile.modules.end(),
                  [](const ModuleRow& row) { return FlopsSourceOf(row) == "measured"; });
  if (counted || absl::StartsWith(profile.fwd_flops_per_gpu.note, "measured")) return "";
  return absl::StrCat(
      "none counted; for measured FLOPs start the job with FLOPSCOPE_COUNTERS=steps=3:4 "
      "(hardware counters over steps 3-4, NVIDIA GPU), or run `flopscope profile ",
      profile.job_id, " --count N` while it runs");
}

std::string GradientAccumulationLine(const Profile& profile) {
  if (profile.micro_batches <= 1) return "";
  const uint32_t k = profile.micro_batches;
  return absl::StrCat(
      k,
      " micro-batches per optimizer step (forward/backward phases per step); DeepSpeed-style "
      "figures above are per micro-batch (fwd MACs, flops and latency, bwd latency, the model's "
      "rows), per optimizer step: x",
      k, "; iter latency is the whole step (", k,
      " x (fwd + bwd) + step), FLOPS per GPU and samples/second one micro-batch over it, as "
      "DeepSpeed prints them at an accumulation boundary");
}

std::string UnfinishedStepsLine(const Profile& profile) {
  const std::vector<int64_t>& steps = profile.step_scope.unfinished_steps;
  if (steps.empty()) return "";
  return absl::StrCat(steps.size() == 1 ? "step " : "steps ", StepList(steps),
                      " did not finish (the session ended inside it: a crash or an exit "
                      "mid-step): left out of every figure");
}

std::string ClassFromName(const std::string& name) {
  const size_t dot = name.find_last_of("._");
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
}

absl::StatusOr<ProfileOptions> ParseProfileOptions(const std::optional<double>& peak_tflops,
                                                   const std::string& precision) {
  ProfileOptions profile;
  if (peak_tflops) {
    if (*peak_tflops <= 0) return absl::InvalidArgumentError("--peak-tflops must be above 0");
    profile.peak_tflops = peak_tflops;
  }
  if (!precision.empty()) {
    profile.precision = ParsePrecision(precision);
    if (!profile.precision) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--precision '", precision, "' is not known (fp64 fp32 tf32 bf16 fp16 fp8)"));
    }
  }
  return profile;
}

namespace {

// FLOPS of the forward pass, the backward pass and both together, then of every module. The
// backward FLOPs are measured when counted, else estimated (EstimateBwdFlops).
void DeriveFlopsRates(Profile& profile) {
  const std::optional<double> fwd_flops = profile.fwd_flops_per_gpu.value;
  const std::optional<double> fwd = profile.fwd_latency_s.value;
  const std::optional<double> bwd = profile.bwd_latency_s.value;
  auto rate = [](std::optional<double> flops, std::optional<double> seconds,
                 const std::string& missing) -> Figure {
    if (!flops) return {std::nullopt, missing};
    if (!seconds || *seconds <= 0) return {std::nullopt, "latency unknown"};
    return {*flops / *seconds, ""};
  };
  const std::string no_flops = profile.fwd_flops_per_gpu.note;
  EstimateBwdFlops(profile);
  const Figure& bwd_flops = profile.bwd_flops_per_gpu;
  const bool measured = bwd_flops.note == kMeasuredBackward;
  // Every FLOPS figure says where its flops come from (issue 32).
  const std::string& source =
      profile.fwd_flops_source.empty() ? std::string("unknown source") : profile.fwd_flops_source;
  const std::string both_note =
      measured ? (source == "measured" ? "measured"
                                       : absl::StrCat(source, " fwd flops + measured bwd flops"))
               : absl::StrCat("estimated: bwd flops = 2 x fwd flops (fwd flops ", source, ")");
  profile.fwd_flops_per_s = rate(fwd_flops, fwd, no_flops);
  if (profile.fwd_flops_per_s.value) profile.fwd_flops_per_s.note = source;
  profile.bwd_flops_per_s = rate(bwd_flops.value, bwd, no_flops);
  if (profile.bwd_flops_per_s.value) profile.bwd_flops_per_s.note = bwd_flops.note;
  profile.fwd_bwd_flops_per_s =
      rate(fwd_flops && bwd_flops.value ? std::optional<double>(*fwd_flops + *bwd_flops.value)
                                        : std::nullopt,
           fwd && bwd ? std::optional<double>(*fwd + *bwd) : std::nullopt, no_flops);
  if (profile.fwd_bwd_flops_per_s.value) profile.fwd_bwd_flops_per_s.note = both_note;
  profile.fwd_bwd_step_flops_per_s =
      rate(fwd_flops && bwd_flops.value ? std::optional<double>(*fwd_flops + *bwd_flops.value)
                                        : std::nullopt,
           profile.iter_latency_s.value, no_flops);
  if (profile.fwd_bwd_step_flops_per_s.value) profile.fwd_bwd_step_flops_per_s.note = both_note;
  DeriveModuleRates(profile);
}

// Samples per second as DeepSpeed's print_model_profile computes it: the batch size per GPU times
// the world size (not dp_size: model-parallel ranks count too) over the iter latency; with
// gradient accumulation one micro-batch over the optimizer step's iter latency, as DeepSpeed
// prints it at the accumulation boundary.
// The other one, samples_per_s_step_to_step, divides by the step-to-step period instead: what
// the job achieved, the time between steps (data loading) included, each step's k micro-batches.
void DeriveSamplesPerSecond(Profile& profile) {
  const auto samples = [&](const std::optional<double>& seconds, const char* unknown,
                           double micro_batches) -> Figure {
    if (!profile.batch_size) return {std::nullopt, kBatchSizeUnknown};
    if (!seconds || *seconds <= 0) return {std::nullopt, unknown};
    return {
        static_cast<double>(*profile.batch_size) * micro_batches * profile.world_size / *seconds,
        ""};
  };
  profile.samples_per_s = samples(profile.iter_latency_s.value, "iter latency unknown", 1);
  profile.samples_per_s_step_to_step =
      samples(profile.step_scope.step_period_s, "no step-to-step period (fewer than 2 steps)",
              std::max<uint32_t>(profile.micro_batches, 1));
}

// The precision whose peak MFU divides by, and why it was chosen ("" when the user or the job
// named it).
struct ChosenPrecision {
  Precision precision = Precision::kBf16;
  std::string note;
};

// In order: --precision, the dominant counted precision, the announced one, else bf16.
ChosenPrecision ChoosePrecision(const ProfileOptions& options, const Profile& profile) {
  const std::string dominant =
      profile.flops_by_precision.empty() ? "" : profile.flops_by_precision.front().precision;
  if (options.precision) return {*options.precision, ""};
  if (std::optional<Precision> counted = PeakPrecisionOf(dominant)) {
    return {*counted, absl::StrCat("the dominant counted precision (", dominant, ")")};
  }
  if (std::optional<Precision> announced = ParsePrecision(profile.precision)) {
    return {*announced, "the announced precision"};
  }
  if (std::optional<Precision> estimated = ParsePrecision(profile.estimated_precision)) {
    return {*estimated, absl::StrCat("the precision the FLOPs were estimated in (",
                                     profile.estimated_precision, ")")};
  }
  return {Precision::kBf16,
          "assumed bf16: no precision counted, estimated or announced (announce precision=<p> "
          "or pass --precision)"};
}

// MFU: fwd+bwd FLOPS per GPU over the peak of the chosen precision (--peak-tflops, else the
// device's entry in common/peak_flops). Needs profile.precision already set to the choice.
void DeriveMfu(const ProfileOptions& options, const ChosenPrecision& chosen, Profile& profile) {
  std::optional<double> peak = options.peak_tflops;
  std::string peak_problem;
  if (!peak) {
    PeakLookup lookup = LookUpPeak(profile.device, chosen.precision);
    peak = lookup.tflops;
    peak_problem = lookup.problem;
  }
  const Figure& achieved = profile.fwd_bwd_flops_per_s;
  if (peak && *peak > 0) profile.peak_flops_per_s = *peak * 1e12;
  if (!peak || *peak <= 0) {
    profile.mfu = {std::nullopt, peak_problem.empty() ? "peak unknown" : peak_problem};
  } else if (!achieved.value) {
    profile.mfu = {std::nullopt, achieved.note};
  } else {
    profile.mfu = {*achieved.value / (*peak * 1e12),
                   absl::StrCat("against ", *peak, " TFLOPS ", profile.precision,
                                chosen.note.empty() ? "" : ", ", chosen.note)};
  }
}

}  // namespace

void DeriveRates(const ProfileOptions& options, Profile& profile) {
  DeriveFlopsRates(profile);
  DeriveSamplesPerSecond(profile);
  const ChosenPrecision chosen = ChoosePrecision(options, profile);
  profile.precision = PrecisionName(chosen.precision);
  DeriveMfu(options, chosen, profile);
}

Profile BuildProfile(const Report& report, const ProfileOptions& options,
                     bool model_figures_measured) {
  Profile profile;
  profile.job_id = report.job_id();
  FillLayout(report, profile);
  profile.scope = report.ranks_size() == 1
                      ? absl::StrCat("rank ", report.ranks(0).rank())
                      : absl::StrCat(profile.ranks, " ranks, figures per GPU are means");
  const Announced announced = ReadMetadata(report);
  profile.batch_size = announced.batch_size;
  profile.precision = announced.precision;
  profile.estimated_precision = announced.estimated_precision;
  profile.step_scope = StepScopeOf(report);
  const PhaseStats* step = FindPhase(report, kStepRange);
  // Uncounted steps: the daemon keeps counted ones out of the module totals too.
  profile.steps = report.has_steps() ? profile.step_scope.uncounted_steps / profile.ranks
                  : step == nullptr  ? 0
                                     : step->calls() / profile.ranks;
  const double divisor = static_cast<double>(profile.ranks) * std::max<uint64_t>(profile.steps, 1);
  const int params_divisor = RanksOfFirstReplica(report);
  const int counted_ranks = CountedRanks(report);
  profile.passes_marked = FindPhase(report, kForwardPhase) != nullptr;
  for (const ModuleStats& module : report.modules()) {
    profile.modules.push_back(RowFor(module, announced, divisor, params_divisor,
                                     profile.step_scope.window, counted_ranks,
                                     profile.passes_marked));
  }
  if (!announced.tree.empty()) {
    auto never_ran = [&](const ModuleStats& module) {
      return RowFor(module, announced, divisor, params_divisor, profile.step_scope.window,
                    counted_ranks, profile.passes_marked);
    };
    profile.modules = TreeMerge(announced, std::move(profile.modules), never_ran).Merge();
  }
  SumChildParams(profile.modules);
  SumChildFigures(profile.modules);
  for (ModuleRow& row : profile.modules) {
    if (auto why = announced.deepspeed_differs_by_path.find(TreePath(row));
        why != announced.deepspeed_differs_by_path.end()) {
      row.deepspeed_differs = why->second;
    }
    if (row.never_ran && !row.figures_from_children) {
      row.inside_compiled = CompiledAncestor(announced, TreePath(row));
    }
    if (auto shards = announced.shards_by_path.find(TreePath(row));
        shards != announced.shards_by_path.end()) {
      row.params_held.assign(shards->second.begin(), shards->second.end());
    }
  }
  profile.model_end = PutModelFirst(profile.modules);
  FillCountedSummary(report, profile);
  profile.micro_batches = MicroBatchesPerStep(report, profile);
  RowsPerMicroBatch(profile);
  profile.latency_basis = LatencyBasis(report, profile);
  FillGpuStatus(report, profile);
  profile.memory = ReadMemoryLedger(report.metadata());
  for (const auto& entry : report.metadata()) {
    if (entry.key() == kEndSignalKey) ++profile.end_signals[entry.value()];
    if (entry.key() == kEndSignalCutShortKey) ++profile.cut_short_signals[entry.value()];
  }
  profile.flops_source = FlopsSource(profile.modules, report, profile);
  FillSummaryFigures(report, profile);
  if (model_figures_measured) {
    profile.params_of_model.note.clear();
    profile.fwd_flops_of_model.note = profile.fwd_flops_source;
  }
  DeriveRates(options, profile);
  return profile;
}

}  // namespace flopscope::client
