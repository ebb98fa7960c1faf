#include "client/testing/sample_report.h"

#include <string>

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

}  // namespace flopscope::client::testing
