#include "daemon/report/report_builder.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flop_formulas.h"
#include "common/metadata_keys.h"
#include "common/nvtx_vocabulary.h"
#include "daemon/report/demangle.h"
#include "daemon/report/estimate_window.h"
#include "daemon/report/gpu_metadata.h"
#include "daemon/store/step_index.h"
#include "daemon/validate/batch_validator.h"

namespace flopscope::daemon {
namespace {

constexpr char kParamsPrefix[] = "params ";

constexpr uint32_t kDefaultTopKernels = 10;
constexpr char kWholeJob[] = "/";

void AddMemory(const MemoryTotals& from, MemoryTotals& to) {
  to.count += from.count;
  to.time_ns += from.time_ns;
  to.bytes += from.bytes;
}

void AddActivity(const SelfStats& from, SelfStats& to) {
  to.kernels += from.kernels;
  to.gpu_time_ns += from.gpu_time_ns;
  AddMemory(from.copies, to.copies);
  AddMemory(from.sets, to.sets);
}

void SetMemory(const SelfStats& stats, v1::ModuleStats* row) {
  row->set_memcpy_count(stats.copies.count);
  row->set_memcpy_time_ns(stats.copies.time_ns);
  row->set_memcpy_bytes(stats.copies.bytes);
  row->set_memset_count(stats.sets.count);
  row->set_memset_time_ns(stats.sets.time_ns);
  row->set_memset_bytes(stats.sets.bytes);
}

bool HasActivity(const SelfStats& stats) {
  return stats.kernels > 0 || stats.copies.count > 0 || stats.sets.count > 0;
}

std::string MemoryName(v1::ActivityKind kind) {
  return kind == v1::ACTIVITY_KIND_MEMSET ? "[memset]" : "[memcpy]";
}

// The ranks' announcements in order, each per-module key (IsPerModuleKey) that every entry
// announced with one value sent once, at its first place: 64 data-parallel ranks announce the
// same module tree, 50 entries each here. A reader taking the last value per key, and the first
// place of each module, reads the same; keys with differing values, and every other key (the
// injector's per-rank running totals), are sent whole.
void AddMergedMetadata(const std::vector<v1::Metadata>& entries, v1::Report* report) {
  struct Seen {
    const std::string* value = nullptr;
    bool one_value = true;
    bool sent = false;
  };
  absl::flat_hash_map<std::string_view, Seen> per_module;
  for (const v1::Metadata& entry : entries) {
    if (!IsPerModuleKey(entry.key())) continue;
    Seen& seen = per_module[entry.key()];
    if (seen.value == nullptr) {
      seen.value = &entry.value();
    } else if (*seen.value != entry.value()) {
      seen.one_value = false;
    }
  }
  for (const v1::Metadata& entry : entries) {
    auto it = per_module.find(entry.key());
    if (it != per_module.end() && it->second.one_value) {
      if (it->second.sent) continue;
      it->second.sent = true;
    }
    *report->add_metadata() = entry;
  }
}

}  // namespace

// Resolves the path ids of one session to where their figures go, creating modules and phases
// in first-seen order. Ids are scoped to the session, hence one resolver per session.
class ReportBuilder::SessionPaths {
 public:
  explicit SessionPaths(ReportBuilder* builder) : builder_(builder) {}

  void Define(const RankSnapshot::Path& path) { definitions_[path.id] = &path; }

  Target Resolve(uint64_t id, uint32_t depth = 0) {
    if (id == 0) return Target{};
    if (auto it = resolved_.find(id); it != resolved_.end()) return it->second;
    auto definition = definitions_.find(id);
    // Unknown ids and chains deeper than the validator allows only come from a damaged file:
    // their figures are reported as unattributed rather than followed.
    if (definition == definitions_.end() || depth > kMaxNestingDepth) return Target{};
    resolved_[id] = Target{};  // a cycle (damaged file) resolves to unattributed
    const RankSnapshot::Path& path = *definition->second;
    const Target parent = Resolve(path.parent_id, depth + 1);
    Target target;
    if (path.domain == kFlopscopeDomain) {
      target = Target{parent.module, builder_->FindOrAddPhase(path.name)};
    } else {
      target = Target{builder_->FindOrAddModule(parent.module, path.name, path.domain), -1};
    }
    resolved_[id] = target;
    return target;
  }

  // The phases path `id` and its flopscope-domain ancestors stand for, innermost first, each
  // once (a phase nested in one of the same name is not counted twice).
  const std::vector<int>& PhasesOf(uint64_t id) {
    if (auto it = phases_.find(id); it != phases_.end()) return it->second;
    std::vector<int> chain;
    uint64_t at = id;
    // Bounded like Resolve: a damaged file's cycle or overlong chain stops here.
    for (uint32_t depth = 0; at != 0 && depth <= kMaxNestingDepth; ++depth) {
      auto definition = definitions_.find(at);
      if (definition == definitions_.end()) break;
      const int phase = Resolve(at).phase;
      if (definition->second->domain == kFlopscopeDomain && phase >= 0 &&
          std::find(chain.begin(), chain.end(), phase) == chain.end()) {
        chain.push_back(phase);
      }
      at = definition->second->parent_id;
    }
    return phases_[id] = std::move(chain);
  }

 private:
  ReportBuilder* builder_;
  absl::flat_hash_map<uint64_t, const RankSnapshot::Path*> definitions_;
  absl::flat_hash_map<uint64_t, Target> resolved_;
  absl::flat_hash_map<uint64_t, std::vector<int>> phases_;
};

void ReportBuilder::ListTopKernels(std::string path, uint32_t top) {
  top_kernels_of_ = std::move(path);
  top_kernels_ = top == 0 ? kDefaultTopKernels : top;
}

void ReportBuilder::AddRank(const v1::RankInfo& info, const RankSnapshot& snapshot) {
  v1::RankInfo& rank = ranks_.emplace_back(info);
  ApplyGpuMetadata(snapshot.metadata, &rank);
  // Sessions in sid order are sessions in the order they first connected.
  std::map<int64_t, std::unique_ptr<SessionPaths>> sessions;
  auto session = [&](int64_t sid) -> SessionPaths& {
    std::unique_ptr<SessionPaths>& entry = sessions[sid];
    if (entry == nullptr) entry = std::make_unique<SessionPaths>(this);
    return *entry;
  };
  for (const RankSnapshot::Path& path : snapshot.paths) session(path.sid).Define(path);
  for (const RankSnapshot::Path& path : snapshot.paths) session(path.sid).Resolve(path.id);
  for (const RankSnapshot::PathStats& row : snapshot.stats) {
    AddStats(session(row.sid).Resolve(row.path_id), row.stats);
  }
  for (const PathSpan& span : snapshot.spans)
    AddSpan(session(span.sid).Resolve(span.path_id), span);
  if (snapshot.step_figures) {
    step_rollup_.AddRank(info.rank(), *snapshot.step_figures, [&](int64_t sid, uint64_t path_id) {
      const Target target = session(sid).Resolve(path_id);
      return StepTarget{target.module, target.phase};
    });
  }
  const int rank_index = static_cast<int>(ranks_.size()) - 1;
  AddCounted(sessions, snapshot, rank_index);
  for (const v1::CounterWindowRecord& window : snapshot.windows) {
    v1::RankCounterWindow& entry = windows_.emplace_back();
    entry.set_rank(info.rank());
    *entry.mutable_window() = window;
  }
  if (!top_kernels_of_.empty()) {
    for (const RankSnapshot::KernelGroup& group : snapshot.kernel_groups) {
      AddKernelGroup(session(group.sid).Resolve(group.path_id), group);
    }
  }
  for (const auto& [cause, records] : snapshot.losses) losses_[cause] += records;
  // Estimates hold until announced again: a window gets the median of its steps' figures.
  std::vector<v1::Metadata> metadata = snapshot.metadata;
  if (snapshot.step_figures) WindowEstimates(snapshot.step_figures->window_step_ends_ns, &metadata);
  metadata_.insert(metadata_.end(), metadata.begin(), metadata.end());
  AddParams(info.layout().dp_rank(), snapshot.metadata);
}

int ReportBuilder::FindOrAddModule(int parent, const std::string& name, const std::string& domain) {
  std::string path = parent < 0 ? name : absl::StrCat(modules_[parent].path, "/", name);
  if (auto it = module_by_path_.find(path); it != module_by_path_.end()) return it->second;
  const int index = static_cast<int>(modules_.size());
  Module& module = modules_.emplace_back();
  module.path = path;
  module.name = name;
  module.domain = domain;
  module.parent = parent;
  module.depth = parent < 0 ? 0 : modules_[parent].depth + 1;
  (parent < 0 ? roots_ : modules_[parent].children).push_back(index);
  module_by_path_.emplace(std::move(path), index);
  return index;
}

int ReportBuilder::FindOrAddPhase(const std::string& name) {
  if (auto it = phase_by_name_.find(name); it != phase_by_name_.end()) return it->second;
  const int index = static_cast<int>(phases_.size());
  phases_.emplace_back().name = name;
  phase_by_name_.emplace(name, index);
  return index;
}

void ReportBuilder::AddStats(const Target& target, const SelfStats& stats) {
  if (target.phase >= 0 && stats.calls > 0) {
    Phase& phase = phases_[target.phase];
    phase.min_ns = phase.calls == 0 ? stats.min_ns : std::min(phase.min_ns, stats.min_ns);
    phase.max_ns = phase.calls == 0 ? stats.max_ns : std::max(phase.max_ns, stats.max_ns);
    phase.calls += stats.calls;
    phase.total_ns += stats.cpu_time_ns;
  }
  if (target.module < 0) {
    AddActivity(stats, unattributed_);
    return;
  }
  SelfStats& self = modules_[target.module].self;
  AddActivity(stats, self);
  if (target.phase < 0) {  // a phase's own calls are not its enclosing module's
    self.calls += stats.calls;
    self.cpu_time_ns += stats.cpu_time_ns;
  }
}

CountedFigures& ReportBuilder::CountedOf(int module, int rank_index, uint64_t steps) {
  if (module < 0) {
    unattributed_steps_.Add(rank_index, steps);
    return unattributed_counted_;
  }
  // Once an ancestor has the rank's steps, so do all of its ancestors.
  for (int at = module; at >= 0 && modules_[at].counted_steps.Add(rank_index, steps);
       at = modules_[at].parent) {
  }
  return modules_[module].counted;
}

void ReportBuilder::AddCounted(SessionMap& sessions, const RankSnapshot& snapshot, int rank_index) {
  auto session = [&](int64_t sid) -> SessionPaths& {
    std::unique_ptr<SessionPaths>& entry = sessions[sid];
    if (entry == nullptr) entry = std::make_unique<SessionPaths>(this);
    return *entry;
  };
  // RankReader gives at least 1 when something was counted; a hand-made snapshot may not.
  const uint64_t steps = std::max<uint64_t>(snapshot.counted_steps, 1);
  const double per_step = 1.0 / static_cast<double>(steps);
  for (const RankSnapshot::PathStats& row : snapshot.stats) {
    if (!row.stats.has_flops) continue;
    CountedOf(session(row.sid).Resolve(row.path_id).module, rank_index, steps)
        .AddTotal(row.stats.flops, row.stats.counted_kernels, per_step);
  }
  for (const RankSnapshot::PrecisionRow& row : snapshot.module_flops) {
    CountedOf(session(row.sid).Resolve(row.path_id).module, rank_index, steps)
        .AddPrecision(row.precision, row.flops, per_step);
  }
  for (const RankSnapshot::PrecisionRow& row : snapshot.phase_flops) {
    for (int phase : session(row.sid).PhasesOf(row.path_id)) {
      phases_[phase].counted.AddPrecision(row.precision, row.flops, per_step);
    }
  }
  for (const RankSnapshot::PathPhaseFlops& row : snapshot.path_phase_flops) {
    SessionPaths& paths = session(row.sid);
    const int module = paths.Resolve(row.path_id).module;
    if (module < 0) continue;  // <unattributed> has no DeepSpeed row to split
    for (int phase : paths.PhasesOf(row.phase_path_id)) {
      const std::string& name = phases_[phase].name;
      if (name != kForwardPhase && name != kBackwardPhase) continue;
      modules_[module].counted.AddPass(name == kForwardPhase, row.flops, per_step);
      break;  // the innermost pass range decides
    }
  }
}

void ReportBuilder::AddSpan(const Target& target, const PathSpan& span) {
  if (target.module < 0 || target.phase >= 0) return;
  Module& module = modules_[target.module];
  module.span_ns += span.span_ns;
  module.busy_ns += span.busy_ns;
  module.has_span = true;
}

bool ReportBuilder::InTopKernelsSubtree(int module) const {
  if (top_kernels_of_ == kWholeJob) return true;
  if (module < 0) return top_kernels_of_ == kUnattributedPath;
  const std::string& path = modules_[module].path;
  return path == top_kernels_of_ ||
         (absl::StartsWith(path, top_kernels_of_) && path.size() > top_kernels_of_.size() &&
          path[top_kernels_of_.size()] == '/');
}

void ReportBuilder::AddKernelGroup(const Target& target, const RankSnapshot::KernelGroup& group) {
  if (!InTopKernelsSubtree(target.module)) return;
  const bool memory =
      group.kind == v1::ACTIVITY_KIND_MEMCPY || group.kind == v1::ACTIVITY_KIND_MEMSET;
  const std::string name = memory ? MemoryName(group.kind) : group.name;
  v1::KernelSummary& total = top_kernel_totals_[{memory ? group.kind : 0, name}];
  if (total.count() == 0) {
    total.set_name(name);
    total.set_kind(memory ? group.kind : v1::ACTIVITY_KIND_KERNEL);
    total.set_min_ns(group.min_ns);
    total.set_max_ns(group.max_ns);
  }
  total.set_count(total.count() + group.count);
  total.set_total_ns(total.total_ns() + group.total_ns);
  total.set_min_ns(std::min(total.min_ns(), group.min_ns));
  total.set_max_ns(std::max(total.max_ns(), group.max_ns));
  total.set_bytes(total.bytes() + group.bytes);
}

bool ReportBuilder::KnowsTopKernelsPath() const {
  return top_kernels_of_ == kWholeJob || top_kernels_of_ == kUnattributedPath ||
         module_by_path_.contains(top_kernels_of_);
}

void ReportBuilder::AppendTopKernels(v1::Report* report) const {
  if (top_kernels_of_.empty()) return;
  report->set_top_kernels_of(top_kernels_of_);
  std::vector<const v1::KernelSummary*> sorted;
  for (const auto& [key, total] : top_kernel_totals_) sorted.push_back(&total);
  std::sort(sorted.begin(), sorted.end(),
            [](const v1::KernelSummary* a, const v1::KernelSummary* b) {
              return a->total_ns() != b->total_ns() ? a->total_ns() > b->total_ns()
                                                    : a->name() < b->name();
            });
  if (sorted.size() > top_kernels_) sorted.resize(top_kernels_);
  for (const v1::KernelSummary* total : sorted) {
    v1::KernelSummary* row = report->add_top_kernels();
    *row = *total;
    row->set_demangled(Demangle(total->name()));
  }
}

void ReportBuilder::AddParams(uint32_t dp_rank, const std::vector<v1::Metadata>& metadata) {
  // The last announcement of a rank wins; the ranks of one replica (its tp x pp shards) add up.
  absl::flat_hash_map<std::string, uint64_t> announced;
  for (const v1::Metadata& entry : metadata) {
    if (!absl::StartsWith(entry.key(), kParamsPrefix)) continue;
    const std::string path(absl::StripAsciiWhitespace(
        absl::string_view(entry.key()).substr(sizeof kParamsPrefix - 1)));
    uint64_t count = 0;
    if (!path.empty() && absl::SimpleAtoi(entry.value(), &count)) announced[path] = count;
  }
  absl::flat_hash_map<std::string, uint64_t>& replica = params_by_replica_[dp_rank];
  for (const auto& [path, count] : announced) replica[path] += count;
}

v1::Report ReportBuilder::Build() const {
  v1::Report report;
  report.set_job_id(job_id_);
  for (const v1::RankInfo& rank : ranks_) *report.add_ranks() = rank;

  // Parents precede their children, so one backward pass makes the activity figures inclusive.
  std::vector<SelfStats> inclusive;
  std::vector<CountedFigures> counted;
  inclusive.reserve(modules_.size());
  counted.reserve(modules_.size());
  for (const Module& module : modules_) {
    inclusive.push_back(module.self);
    counted.push_back(module.counted);
  }
  for (int i = static_cast<int>(modules_.size()) - 1; i >= 0; --i) {
    if (modules_[i].parent < 0) continue;
    AddActivity(inclusive[i], inclusive[modules_[i].parent]);
    counted[modules_[i].parent].Add(counted[i]);
  }
  // Data-parallel replicas hold the same parameters: count one replica (the lowest dp rank
  // included), as DeepSpeed counts the parameters of one model, not of every copy.
  static const absl::flat_hash_map<std::string, uint64_t> kNoParams;
  const auto& params = params_by_replica_.empty() ? kNoParams : params_by_replica_.begin()->second;
  for (int root : roots_) AppendModules(root, inclusive, counted, params, &report);
  if (HasActivity(unattributed_) || unattributed_counted_.counted) {
    v1::ModuleStats* row = report.add_modules();
    row->set_path(kUnattributedPath);
    row->set_name(kUnattributedPath);
    row->set_kernels(unattributed_.kernels);
    if (unattributed_.kernels > 0) row->set_gpu_time_ns(unattributed_.gpu_time_ns);
    unattributed_counted_.SetOn(unattributed_steps_.steps(), row);
    SetMemory(unattributed_, row);
  }
  AppendTopKernels(&report);

  for (size_t index = 0; index < phases_.size(); ++index) {
    const Phase& phase = phases_[index];
    v1::PhaseStats* row = report.add_phases();
    row->set_name(phase.name);
    row->set_calls(phase.calls);
    row->set_cpu_time_ns(phase.total_ns);
    row->set_min_ns(phase.min_ns);
    row->set_max_ns(phase.max_ns);
    step_rollup_.FillPhase(static_cast<int>(index), row);  // uncounted steps, with the median
    phase.counted.SetOn(row);
  }
  for (const auto& [cause, records] : losses_) {
    v1::LossCounter* loss = report.add_losses();
    loss->set_cause(static_cast<v1::LossCause>(cause));
    loss->set_records(records);
  }
  AddMergedMetadata(metadata_, &report);
  for (const v1::RankCounterWindow& window : windows_) *report.add_counter_windows() = window;
  report.set_fp16_convention(kFp16Convention);
  step_rollup_.FillWindow(&report);
  return report;
}

void ReportBuilder::AppendModules(int index, const std::vector<SelfStats>& inclusive,
                                  const std::vector<CountedFigures>& counted,
                                  const absl::flat_hash_map<std::string, uint64_t>& params,
                                  v1::Report* report) const {
  const Module& module = modules_[index];
  const SelfStats& total = inclusive[index];
  v1::ModuleStats* row = report->add_modules();
  row->set_path(module.path);
  row->set_name(module.name);
  row->set_depth(module.depth);
  row->set_domain(module.domain);
  row->set_calls(module.self.calls);
  row->set_cpu_time_ns(module.self.cpu_time_ns);
  row->set_kernels(total.kernels);
  if (total.kernels > 0) row->set_gpu_time_ns(total.gpu_time_ns);
  counted[index].SetOn(module.counted_steps.steps(), row);
  if (module.has_span) {
    row->set_gpu_span_ns(module.span_ns);
    row->set_gpu_busy_ns(module.busy_ns);
  }
  SetMemory(total, row);
  step_rollup_.FillModule(index, row);
  if (auto it = params.find(module.path); it != params.end()) row->set_params(it->second);
  for (int child : module.children) AppendModules(child, inclusive, counted, params, report);
}

}  // namespace flopscope::daemon
