// MetricsRegistry: figures derived from the batches it is shown, labels, and the bounds on how
// many series a scrape can hold.
#include "daemon/metrics/metrics_registry.h"

#include <gtest/gtest.h>
#include <prometheus/check_names.h>

#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "common/peak_flops.h"
#include "daemon/testing/test_batches.h"
#include "daemon/testing/test_exposition.h"

namespace flopscope::daemon::metrics {
namespace {

using fixtures::ExpositionSamples;
using fixtures::kSecondNs;

using fixtures::AddPath;
using fixtures::AddRange;
using fixtures::Hello;

constexpr uint64_t kStepPath = 5;
constexpr uint64_t kModulePath = 6;
// The series name of `hello`'s rank as the registry labels it, plus `extra` labels.
std::string Series(const std::string& name, const v1::SessionHello& hello,
                   const std::string& extra = "") {
  const std::string gpu = hello.devices_size() > 0 ? std::to_string(hello.devices(0).index()) : "";
  const std::string uuid = hello.devices_size() > 0 ? hello.devices(0).uuid() : "";
  return name + "{hostname=\"" + hello.host() + "\",gpu=\"" + gpu + "\",UUID=\"" + uuid +
         "\",job=\"" + hello.job_id() + "\",rank=\"" + std::to_string(hello.rank()) + "\"" + extra +
         "}";
}

v1::KernelFlops* AddCountedKernel(v1::Batch& batch, int64_t step, double fp32, double bf16) {
  v1::KernelFlops* kernel = batch.add_kernel_flops();
  kernel->set_path_id(kModulePath);
  kernel->set_counted_step(step);
  kernel->mutable_flops()->set_fp32(fp32);
  v1::FlopCounters::Tensor* tensor = kernel->mutable_flops()->add_tensor();
  tensor->set_source("bf16_dst_fp32");
  tensor->set_flops(bf16);
  return kernel;
}

TEST(MetricsRegistryTest, StepTimeFlopsAndMfuComeFromTheCommittedBatches) {
  v1::SessionHello hello = Hello("job-a", 3, "s1");
  hello.mutable_devices(0)->set_uuid("GPU-1234");
  MetricsRegistry registry;
  registry.OnConnected(hello);
  v1::Batch definitions;
  AddPath(definitions, kStepPath, 0, "step", "flopscope");
  AddPath(definitions, kModulePath, 0, "model");
  AddRange(definitions, kStepPath, 0, 2 * kSecondNs);
  registry.OnCommitted(hello, definitions, RankTotals{});
  // A later batch: a counted step (slow, left out of the step time) and a later uncounted one.
  const int64_t counted_ns = 9 * kSecondNs, latest_ns = kSecondNs * 3 / 4;
  v1::Batch later;
  AddRange(later, kStepPath, 2 * kSecondNs, counted_ns)->set_counted(true);
  AddRange(later, kStepPath, 11 * kSecondNs, latest_ns);
  AddRange(later, kModulePath, 11 * kSecondNs, latest_ns / 2);
  const double fp32 = 2e12, bf16 = 3e14;
  AddCountedKernel(later, 1, fp32, bf16);
  AddCountedKernel(later, 1, fp32, bf16);
  AddCountedKernel(later, 0, 1e20, 0);  // an older counted step: not the latest
  registry.OnCommitted(hello, later, RankTotals{});

  const std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  EXPECT_EQ(samples.at(Series("flopscope_rank_steps_total", hello)), 3);
  const double step_s = static_cast<double>(latest_ns) / 1e9;
  EXPECT_DOUBLE_EQ(samples.at(Series("flopscope_rank_step_seconds", hello)), step_s);
  const double step_flops = 2 * (fp32 + bf16);
  EXPECT_DOUBLE_EQ(samples.at(Series("flopscope_rank_step_flops", hello)), step_flops);
  const double achieved = step_flops / step_s;
  EXPECT_DOUBLE_EQ(samples.at(Series("flopscope_rank_achieved_flops_per_second", hello)), achieved);
  // bf16 tensor FLOPs dominate: MFU against the H100's dense bf16 peak.
  const PeakLookup peak = LookUpPeak(hello.devices(0).name(), Precision::kBf16);
  ASSERT_TRUE(peak.tflops.has_value());
  EXPECT_DOUBLE_EQ(samples.at(Series("flopscope_rank_mfu_ratio", hello)),
                   achieved / (*peak.tflops * 1e12));
  EXPECT_EQ(samples.at(Series("flopscope_rank_connected", hello)), 1);
  EXPECT_EQ(samples.at(Series("flopscope_rank_batches_total", hello)), 2);
  EXPECT_EQ(samples.at(Series("flopscope_rank_records_ingested_total", hello, ",kind=\"range\"")),
            definitions.ranges_size() + later.ranges_size());
  EXPECT_EQ(
      samples.at(Series("flopscope_rank_records_ingested_total", hello, ",kind=\"kernel_flops\"")),
      later.kernel_flops_size());
}

TEST(MetricsRegistryTest, OnlyFlopscopeStepRangesAreSteps) {
  const v1::SessionHello hello = Hello("job-b", 0, "s1");
  MetricsRegistry registry;
  v1::Batch batch;
  AddPath(batch, kStepPath, 0, "step", "");  // a module named step in the default domain
  AddRange(batch, kStepPath, 0, kSecondNs);
  registry.OnCommitted(hello, batch, RankTotals{});
  const std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  EXPECT_EQ(samples.at(Series("flopscope_rank_steps_total", hello)), 0);
  EXPECT_FALSE(samples.contains(Series("flopscope_rank_step_seconds", hello)));
  EXPECT_FALSE(samples.contains(Series("flopscope_rank_mfu_ratio", hello)));
  EXPECT_EQ(samples.at(Series("flopscope_rank_connected", hello)), 0);
}

TEST(MetricsRegistryTest, LossesByCauseAndRejectionsByRule) {
  const v1::SessionHello hello = Hello("job-c", 1, "s1");
  MetricsRegistry registry;
  RankTotals totals;
  totals.losses[v1::LOSS_CAUSE_BUFFER_FULL] = 5;
  totals.losses[v1::LOSS_CAUSE_CUPTI_DROPPED] = 2;
  registry.OnCommitted(hello, v1::Batch(), totals);
  // More rules than kept: the last ones add up under "other", no record is lost.
  uint64_t rejected = 0;
  for (size_t i = 0; i < kMaxRejectionRules + 3; ++i) {
    registry.OnRejected(hello, "rule" + std::to_string(i), i + 1);
    rejected += i + 1;
  }
  const std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  const std::string lost = "flopscope_rank_records_lost_total";
  EXPECT_EQ(samples.at(Series(lost, hello, ",cause=\"buffer_full\"")), 5);
  EXPECT_EQ(samples.at(Series(lost, hello, ",cause=\"cupti_dropped\"")), 2);
  EXPECT_EQ(samples.at(Series(lost, hello, ",cause=\"daemon_unreachable\"")), 0);
  size_t rule_series = 0;
  double rejected_sum = 0;
  for (const auto& [series, value] : samples) {
    if (series.rfind("flopscope_rank_records_rejected_total{", 0) != 0) continue;
    ++rule_series;
    rejected_sum += value;
  }
  EXPECT_EQ(rule_series, kMaxRejectionRules);
  EXPECT_EQ(rejected_sum, static_cast<double>(rejected));
  EXPECT_TRUE(
      samples.contains(Series("flopscope_rank_records_rejected_total", hello, ",rule=\"other\"")));
}

TEST(MetricsRegistryTest, RanksAndSeriesPerRankAreBounded) {
  constexpr size_t kMaxRanks = 3;
  MetricsRegistry registry(kMaxRanks);
  const v1::SessionHello live = Hello("job-d", 0, "live");
  registry.OnConnected(live);
  for (int rank = 1; rank <= 5; ++rank) {
    v1::Batch batch;
    AddPath(batch, kStepPath, 0, "step", "flopscope");
    AddRange(batch, kStepPath, 0, kSecondNs);
    AddCountedKernel(batch, 0, 1, 1);
    RankTotals totals;
    for (int cause = v1::LossCause_MIN; cause <= v1::LossCause_MAX; ++cause) {
      totals.losses[cause] = 1;
    }
    registry.OnCommitted(Hello("job-d", rank, "s"), batch, totals);
    for (size_t i = 0; i < 2 * kMaxRejectionRules; ++i) {
      registry.OnRejected(Hello("job-d", rank, "s"), "r" + std::to_string(i), 1);
    }
  }
  const std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  EXPECT_EQ(samples.at("flopscope_daemon_ranks_tracked"), kMaxRanks);
  EXPECT_EQ(samples.at("flopscope_daemon_ranks_evicted_total"), 3);
  // The connected rank outlived the disconnected ones that were updated after it.
  EXPECT_EQ(samples.at(Series("flopscope_rank_connected", live)), 1);
  EXPECT_FALSE(samples.contains(Series("flopscope_rank_connected", Hello("job-d", 1, "s"))));
  std::map<std::string, size_t> series_per_rank;
  for (const auto& [series, value] : samples) {
    const size_t rank = series.find("rank=\"");
    if (rank == std::string::npos) continue;
    const size_t end = series.find('"', rank + 6);
    ++series_per_rank[series.substr(rank, end - rank)];
  }
  EXPECT_EQ(series_per_rank.size(), kMaxRanks);
  for (const auto& [rank, count] : series_per_rank) EXPECT_LE(count, kMaxSeriesPerRank) << rank;
}

TEST(MetricsRegistryTest, DeviceFactsFromMetadataAndEscapedLabels) {
  v1::SessionHello hello = Hello("job-e", 0, "s1");
  hello.clear_devices();  // CUDA started after the hello: the injector says gpu.0.* later
  hello.set_host("host\"with\\quotes");
  MetricsRegistry registry;
  v1::Batch batch;
  v1::Metadata* uuid = batch.add_metadata();
  uuid->set_key("gpu.0.uuid");
  uuid->set_value("GPU-abcd");
  registry.OnCommitted(hello, batch, RankTotals{});
  const std::string text = registry.Render();
  EXPECT_NE(text.find(R"(hostname="host\"with\\quotes",gpu="0",UUID="GPU-abcd",job="job-e")"),
            std::string::npos)
      << text;
}

TEST(MetricsRegistryTest, EveryNameAndLabelNameFollowsTheGrammar) {
  MetricsRegistry registry;
  const v1::SessionHello hello = Hello("job-f", 0, "s1");
  registry.OnConnected(hello);
  v1::Batch batch;
  AddPath(batch, kStepPath, 0, "step", "flopscope");
  AddRange(batch, kStepPath, 0, kSecondNs);
  AddCountedKernel(batch, 0, 1e12, 1e12);
  registry.OnCommitted(hello, batch, RankTotals{});
  registry.OnRejected(hello, "ranges", 3);
  size_t checked = 0;
  const std::string text = registry.Render();
  for (const auto& [series, value] : ExpositionSamples(text)) {
    const size_t brace = series.find('{');
    EXPECT_TRUE(prometheus::CheckMetricName(series.substr(0, brace))) << series;
    if (brace == std::string::npos) continue;
    // name="value" pairs; values here hold no quote or comma.
    for (size_t at = brace + 1; at < series.size() - 1;) {
      const size_t equals = series.find('=', at);
      EXPECT_TRUE(prometheus::CheckLabelName(series.substr(at, equals - at))) << series;
      at = series.find('"', equals + 2) + 2;
    }
    ++checked;
  }
  EXPECT_GT(checked, 20u);
  // Every other line is a family's HELP or TYPE (a HELP text on one line).
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '#') continue;
    EXPECT_TRUE(line.starts_with("# HELP flopscope_") || line.starts_with("# TYPE flopscope_"))
        << line;
  }
}

TEST(MetricsRegistryTest, PrunedJobsAndTheirBytesAreCounted) {
  MetricsRegistry registry;
  EXPECT_EQ(ExpositionSamples(registry.Render()).at("flopscope_daemon_jobs_pruned_total"), 0);
  registry.OnJobPruned(4096);
  registry.OnJobPruned(1000);
  const std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  EXPECT_EQ(samples.at("flopscope_daemon_jobs_pruned_total"), 2);
  EXPECT_EQ(samples.at("flopscope_daemon_pruned_bytes_total"), 4096 + 1000);
}

}  // namespace
}  // namespace flopscope::daemon::metrics

namespace flopscope::daemon::metrics {
namespace {

// A snapshot of open ranges taken at `time_ns`: one thread whose outermost range opened at
// `oldest_ns` (the step) with a module under it a second later; or nothing open.
void SetOpenRangesAt(v1::Batch& batch, int64_t time_ns, std::optional<int64_t> oldest_ns) {
  v1::OpenRanges* open = batch.mutable_open_ranges();
  open->set_time_ns(time_ns);
  if (!oldest_ns) return;
  v1::ThreadOpenRanges* thread = open->add_threads();
  v1::OpenRange* step = thread->add_phases();
  step->set_path_id(kStepPath);
  step->set_start_ns(*oldest_ns);
  v1::OpenRange* module = thread->add_modules();
  module->set_path_id(kModulePath);
  module->set_start_ns(*oldest_ns + kSecondNs);
}

TEST(MetricsRegistryTest, TheOldestOpenRangeIsAgedAtTheScrape) {
  const int64_t base = fixtures::BaseNs();
  int64_t now = base + 40 * kSecondNs;
  MetricsRegistry registry(kDefaultMaxRanks, [&now] { return now; });
  const v1::SessionHello hung = Hello("job-w", 1, "w1");
  const v1::SessionHello idle = Hello("job-w", 0, "w0");
  registry.OnConnected(hung);
  registry.OnConnected(idle);
  v1::Batch batch;
  SetOpenRangesAt(batch, base + 10 * kSecondNs, base + 5 * kSecondNs);
  registry.OnCommitted(hung, batch, RankTotals{});
  v1::Batch nothing;
  SetOpenRangesAt(nothing, base + 10 * kSecondNs, std::nullopt);
  registry.OnCommitted(idle, nothing, RankTotals{});
  const std::string gauge = "flopscope_rank_oldest_open_range_seconds";

  std::map<std::string, double> samples = ExpositionSamples(registry.Render());
  EXPECT_DOUBLE_EQ(samples.at(Series(gauge, hung)), 35.0);  // now - the step's start
  EXPECT_FALSE(samples.contains(Series(gauge, idle))) << "nothing open: no sample";
  // Unchanged snapshots are not resent: the scrape alone ages the range.
  now += 20 * kSecondNs;
  samples = ExpositionSamples(registry.Render());
  EXPECT_DOUBLE_EQ(samples.at(Series(gauge, hung)), 55.0);
  // An older snapshot (a spool's replay) does not replace the newer one.
  v1::Batch older;
  SetOpenRangesAt(older, base + 9 * kSecondNs, std::nullopt);
  registry.OnCommitted(hung, older, RankTotals{});
  EXPECT_DOUBLE_EQ(ExpositionSamples(registry.Render()).at(Series(gauge, hung)), 55.0);
  // A rank whose streams ended has no sample: an alert on it would never clear.
  registry.OnDisconnected(hung);
  EXPECT_FALSE(ExpositionSamples(registry.Render()).contains(Series(gauge, hung)));
}

}  // namespace
}  // namespace flopscope::daemon::metrics
