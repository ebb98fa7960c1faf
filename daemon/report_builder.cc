#include "daemon/report_builder.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/batch_validator.h"

namespace flopscope::daemon {
namespace {

constexpr char kParamsPrefix[] = "params ";

void AddActivity(const SelfStats& from, SelfStats& to) {
  to.kernels += from.kernels;
  to.gpu_time_ns += from.gpu_time_ns;
  to.flops += from.flops;
  to.has_flops = to.has_flops || from.has_flops;
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

 private:
  ReportBuilder* builder_;
  absl::flat_hash_map<uint64_t, const RankSnapshot::Path*> definitions_;
  absl::flat_hash_map<uint64_t, Target> resolved_;
};

void ReportBuilder::AddRank(const v1::RankInfo& info, const RankSnapshot& snapshot) {
  ranks_.push_back(info);
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
  for (const auto& [cause, records] : snapshot.losses) losses_[cause] += records;
  metadata_.insert(metadata_.end(), snapshot.metadata.begin(), snapshot.metadata.end());
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
  phases_.push_back(Phase{name});
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
  inclusive.reserve(modules_.size());
  for (const Module& module : modules_) inclusive.push_back(module.self);
  for (int i = static_cast<int>(modules_.size()) - 1; i >= 0; --i) {
    if (modules_[i].parent >= 0) AddActivity(inclusive[i], inclusive[modules_[i].parent]);
  }
  // Data-parallel replicas hold the same parameters: count one replica (the lowest dp rank
  // included), as DeepSpeed counts the parameters of one model, not of every copy.
  static const absl::flat_hash_map<std::string, uint64_t> kNoParams;
  const auto& params = params_by_replica_.empty() ? kNoParams : params_by_replica_.begin()->second;
  for (int root : roots_) AppendModules(root, inclusive, params, &report);
  if (unattributed_.kernels > 0) {
    v1::ModuleStats* row = report.add_modules();
    row->set_path(kUnattributedPath);
    row->set_name(kUnattributedPath);
    row->set_kernels(unattributed_.kernels);
    row->set_gpu_time_ns(unattributed_.gpu_time_ns);
    if (unattributed_.has_flops) row->set_flops(unattributed_.flops);
  }

  for (const Phase& phase : phases_) {
    v1::PhaseStats* row = report.add_phases();
    row->set_name(phase.name);
    row->set_calls(phase.calls);
    row->set_cpu_time_ns(phase.total_ns);
    row->set_min_ns(phase.min_ns);
    row->set_max_ns(phase.max_ns);
  }
  for (const auto& [cause, records] : losses_) {
    v1::LossCounter* loss = report.add_losses();
    loss->set_cause(static_cast<v1::LossCause>(cause));
    loss->set_records(records);
  }
  for (const v1::Metadata& entry : metadata_) *report.add_metadata() = entry;
  return report;
}

void ReportBuilder::AppendModules(int index, const std::vector<SelfStats>& inclusive,
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
  if (total.has_flops) row->set_flops(total.flops);
  if (auto it = params.find(module.path); it != params.end()) row->set_params(it->second);
  for (int child : module.children) AppendModules(child, inclusive, params, report);
}

}  // namespace flopscope::daemon
