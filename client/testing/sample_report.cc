#include "client/testing/sample_report.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace flopscope::client::testing {
namespace {

using flopscope::v1::LossCause;
using flopscope::v1::ModuleStats;
using flopscope::v1::Report;

ModuleStats* AddModule(Report& report, const std::string& path, const std::string& name,
                       uint32_t depth, uint64_t calls, int64_t cpu_time_ns) {
  ModuleStats* module = report.add_modules();
  module->set_path(path);
  module->set_name(name);
  module->set_depth(depth);
  module->set_calls(calls);
  module->set_cpu_time_ns(cpu_time_ns);
  return module;
}

void AddRank(Report& report, int rank, const std::string& host, int64_t pid) {
  flopscope::v1::RankInfo* info = report.add_ranks();
  info->set_job_id(report.job_id());
  info->set_rank(rank);
  info->set_world_size(2);
  info->set_host(host);
  info->set_pid(pid);
  info->set_gpu_status("no CUDA driver: NVTX ranges only");
}

void AddPhase(Report& report, const std::string& name, uint64_t calls, int64_t total,
              int64_t min_ns, int64_t max_ns) {
  flopscope::v1::PhaseStats* phase = report.add_phases();
  phase->set_name(name);
  phase->set_calls(calls);
  phase->set_cpu_time_ns(total);
  phase->set_min_ns(min_ns);
  phase->set_max_ns(max_ns);
}

}  // namespace

Report CpuOnlyReport() {
  Report report;
  report.set_job_id("demo-job");
  AddRank(report, 0, "node-a", 101);
  AddRank(report, 1, "node-b", 202);
  auto* rank_loss = report.mutable_ranks(0)->add_losses();
  rank_loss->set_cause(LossCause::LOSS_CAUSE_BUFFER_FULL);
  rank_loss->set_records(3);

  AddModule(report, "Net", "Net", 0, 4, 8'000'000)->set_params(1'250'000);
  AddModule(report, "Net/encoder", "encoder", 1, 4, 6'000'000)->set_params(1'000'000);
  AddModule(report, "Net/encoder/attn \"q\"\\", "attn \"q\"\\", 2, 8, 2'500'000);
  AddModule(report, "Net/head", "head", 1, 4, 1'000'000)->set_params(250'000);

  AddPhase(report, "step", 2, 9'000'000, 4'000'000, 5'000'000);
  AddPhase(report, "forward", 2, 3'000'000, 1'400'000, 1'600'000);

  auto* loss = report.add_losses();
  loss->set_cause(LossCause::LOSS_CAUSE_BUFFER_FULL);
  loss->set_records(3);
  auto* batch_size = report.add_metadata();
  batch_size->set_key("batch_size");
  batch_size->set_value("8");
  auto* params = report.add_metadata();
  params->set_key("params Net");
  params->set_value("1250000");
  return report;
}

Report GpuReport() {
  Report report = CpuOnlyReport();
  const int64_t gpu_times[] = {7'000'000, 5'000'000, 2'000'000, 900'000};
  const uint64_t kernels[] = {40, 30, 16, 10};
  for (int i = 0; i < report.modules_size(); ++i) {
    report.mutable_modules(i)->set_gpu_time_ns(gpu_times[i]);
    report.mutable_modules(i)->set_kernels(kernels[i]);
  }
  report.mutable_modules(0)->set_flops(2.5e12);
  for (auto& rank : *report.mutable_ranks()) {
    rank.clear_gpu_status();
    rank.set_kernels(20);
  }
  return report;
}

void Announce(flopscope::v1::Report* report, const std::string& key, const std::string& value) {
  auto* entry = report->add_metadata();
  entry->set_key(key);
  entry->set_value(value);
}

namespace {

// One module of ContainerTreeReport: its model path, parent, class, params, and the range path
// it ran under with its forward and backward time ("" : it never ran).
struct SampleTreeModule {
  const char* path;
  const char* parent;
  const char* class_name;
  uint64_t params;
  const char* ran_as;
  int64_t fwd_ns;
  int64_t bwd_ns;
};

constexpr SampleTreeModule kSampleTree[] = {
    {"Net", "", "Net", 1600, "Net", 900'000, 1'800'000},
    {"Net/embed", "Net", "Embedding", 100, "Net/embed", 50'000, 80'000},
    {"Net/layers", "Net", "ModuleList", 1000, "", 0, 0},
    {"Net/layers.0", "Net/layers", "Block", 500, "Net/layers.0", 300'000, 600'000},
    {"Net/layers.0/attn", "Net/layers.0", "Attention", 400, "Net/layers.0/attn", 200'000, 350'000},
    {"Net/layers.1", "Net/layers", "Block", 500, "Net/layers.1", 320'000, 640'000},
    {"Net/heads", "Net", "ModuleDict", 300, "", 0, 0},
    {"Net/heads.spare", "Net/heads", "Linear", 300, "", 0, 0},
    {"Net/unused", "Net", "LayerNorm", 16, "", 0, 0},
    {"Net/head", "Net", "Linear", 184, "Net/layers.1/head", 40'000, 70'000},
    {"CrossEntropyLoss", "", "CrossEntropyLoss", 0, "CrossEntropyLoss", 60'000, 20'000},
};

void SetStepLatency(int64_t ns, flopscope::v1::StepLatency* latency) {
  latency->set_samples(1);
  latency->set_median_ns(ns);
  latency->set_min_ns(ns);
  latency->set_max_ns(ns);
}

}  // namespace

Report ContainerTreeReport() {
  Report report;
  report.set_job_id("tree");
  report.add_ranks()->set_world_size(1);
  int64_t index = 0;
  for (const SampleTreeModule& module : kSampleTree) {
    const std::string path = module.path;
    const std::string parent = module.parent;
    // The loss is a root of its own: index 0 of its own tree.
    const int64_t place = parent.empty() ? 0 : ++index;
    Announce(&report, "module " + path,
             parent.empty() ? std::to_string(place) : std::to_string(place) + " " + parent);
    Announce(&report, "class " + path, module.class_name);
    Announce(&report, "params " + path, std::to_string(module.params));
    const std::string ran_as = module.ran_as;
    if (ran_as.empty()) continue;
    if (ran_as != path) Announce(&report, "range_module " + ran_as, path);
  }
  // The daemon's rows by range path, the loss first and the rest out of model order.
  for (const int i : {10, 9, 5, 0, 4, 1, 3}) {
    const SampleTreeModule& module = kSampleTree[i];
    const std::string ran_as = module.ran_as;
    ModuleStats* stats =
        AddModule(report, ran_as, ran_as.substr(ran_as.rfind('/') + 1),
                  static_cast<uint32_t>(std::count(ran_as.begin(), ran_as.end(), '/')), 2,
                  module.fwd_ns + module.bwd_ns);
    SetStepLatency(module.fwd_ns + module.bwd_ns, stats->mutable_step_latency());
    SetStepLatency(module.fwd_ns, stats->mutable_fwd_step_latency());
    SetStepLatency(module.bwd_ns, stats->mutable_bwd_step_latency());
  }
  const std::pair<const char*, int64_t> phases[] = {
      {"forward", 1'000'000}, {"backward", 2'000'000}, {"optimizer", 100'000}, {"step", 3'500'000}};
  for (const auto& [name, ns] : phases) AddPhase(report, name, 1, ns, ns, ns);
  for (auto& phase : *report.mutable_phases()) phase.set_median_ns(phase.cpu_time_ns());
  report.mutable_steps()->set_requested(true);
  report.mutable_steps()->set_first_step(1);
  report.mutable_steps()->set_last_step(1);
  report.mutable_steps()->set_uncounted_steps(1);
  return report;
}

std::vector<std::string> ContainerTreeModelPaths() {
  std::vector<std::string> paths;
  for (const SampleTreeModule& module : kSampleTree) paths.push_back(module.path);
  return paths;
}

std::vector<TreeLine> DetailedTreeLines(const std::string& text) {
  const size_t begin = text.find("Detailed Profile per GPU");
  if (begin == std::string::npos) return {};
  // "Net(" for the root, "  (0): Block(" below it; figure lines start with a number.
  static const std::regex kHead(R"(^( *)(?:\((.+?)\): )?([A-Za-z_][A-Za-z0-9_.]*)\()");
  std::vector<TreeLine> lines;
  std::istringstream in(text.substr(begin));
  std::string line;
  std::getline(in, line);  // the banner
  bool tree = false;
  while (std::getline(in, line)) {
    if (line.rfind("------", 0) == 0) break;  // the closing rule
    std::smatch match;
    if (!std::regex_search(line, match, kHead)) continue;
    // The root is the first line with no indent after the notes.
    if (match[1].length() == 0 && match[2].length() == 0) tree = true;
    if (!tree) continue;
    lines.push_back({static_cast<uint32_t>(match[1].length() / 2), match[2].str(), match[3].str()});
  }
  return lines;
}

}  // namespace flopscope::client::testing
