#include "client/documents/report_json.h"

#include "absl/strings/str_cat.h"
#include "client/testing/json_parse_for_test.h"
#include "client/testing/sample_report.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

using testing::FlattenJson;

std::map<std::string, std::string> Parse(const flopscope::v1::Report& report) {
  absl::StatusOr<std::map<std::string, std::string>> flat = FlattenJson(RenderReportJson(report));
  if (absl::IsUnavailable(flat.status())) return {};
  EXPECT_TRUE(flat.ok()) << flat.status() << "\n" << RenderReportJson(report);
  return flat.value_or(std::map<std::string, std::string>{});
}

#define PARSE_OR_SKIP(flat, report)                              \
  const std::map<std::string, std::string> flat = Parse(report); \
  if (flat.empty()) GTEST_SKIP() << "python3 is needed to parse the JSON back"

TEST(RenderReportJsonTest, HasExactlyTheContractedTopLevelKeys) {
  PARSE_OR_SKIP(flat, testing::CpuOnlyReport());
  EXPECT_EQ(flat.at("#"), "11");
  EXPECT_EQ(flat.at("schema_version"), absl::StrCat(kReportSchemaVersion));
  EXPECT_EQ(flat.at("spooled"), "0");  // nothing waits in a spool
  EXPECT_EQ(flat.at("job"), "\"demo-job\"");
  EXPECT_EQ(flat.at("ranks#"), "2");
  EXPECT_EQ(flat.at("modules#"), "4");
  EXPECT_EQ(flat.at("phases#"), "2");
  EXPECT_EQ(flat.at("losses#"), "1");
  EXPECT_EQ(flat.at("counter_windows#"), "0");
  EXPECT_EQ(flat.at("fp16_convention"), "\"\"");
  EXPECT_EQ(flat.at("rejected.batches"), "0");  // present, and zero, when nothing was refused
  EXPECT_EQ(flat.at("rejected.rules#"), "0");
}

TEST(RenderReportJsonTest, BatchesTheDaemonRejectedAreSummedByRule) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  auto add = [](flopscope::v1::RankInfo* rank, const char* rule, uint64_t batches,
                uint64_t records) {
    flopscope::v1::Rejection* rejection = rank->add_rejections();
    rejection->set_rule(rule);
    rejection->set_batches(batches);
    rejection->set_records(records);
  };
  add(report.mutable_ranks(0), "ranges", 2, 100);
  add(report.mutable_ranks(1), "ranges", 1, 20);
  add(report.mutable_ranks(1), "seq", 1, 5);
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("rejected.batches"), "4");
  EXPECT_EQ(flat.at("rejected.records"), "125");
  EXPECT_EQ(flat.at("rejected.rules.ranges.batches"), "3");
  EXPECT_EQ(flat.at("rejected.rules.ranges.records"), "120");
  EXPECT_EQ(flat.at("rejected.rules.seq.records"), "5");
  EXPECT_EQ(flat.at("ranks[1].rejected.batches"), "2");
  EXPECT_EQ(flat.at("ranks[0].rejected.rules.ranges.records"), "100");
}

TEST(RenderReportJsonTest, ModulesCarryEveryFieldWithNullWhereUnknown) {
  PARSE_OR_SKIP(flat, testing::CpuOnlyReport());
  EXPECT_EQ(flat.at("modules[0]#"), "16");
  EXPECT_EQ(flat.at("modules[0].path"), "\"Net\"");
  EXPECT_EQ(flat.at("modules[0].calls"), "4");
  EXPECT_EQ(flat.at("modules[0].cpu_time_s"), "0.008");
  EXPECT_EQ(flat.at("modules[0].gpu_time_s"), "null");
  EXPECT_EQ(flat.at("modules[0].kernels"), "0");
  EXPECT_EQ(flat.at("modules[0].gpu_span_s"), "null");
  EXPECT_EQ(flat.at("modules[0].gpu_busy_s"), "null");
  EXPECT_EQ(flat.at("modules[0].memcpy.count"), "0");
  EXPECT_EQ(flat.at("modules[0].memset.bytes"), "0");
  EXPECT_EQ(flat.at("modules[0].flops"), "null");
  EXPECT_EQ(flat.at("modules[0].fwd_flops"), "null");
  EXPECT_EQ(flat.at("modules[0].bwd_flops"), "null");
  EXPECT_EQ(flat.at("modules[0].params"), "1250000");
  EXPECT_EQ(flat.at("modules[0].flops_by_precision#"), "0");
  EXPECT_EQ(flat.at("modules[0].counted_steps"), "0");
  EXPECT_EQ(flat.at("modules[0].counted_kernels"), "0");
  // Depth-first order as the daemon sent it; the escaped name decodes back to the original.
  EXPECT_EQ(flat.at("modules[1].path"), "\"Net/encoder\"");
  EXPECT_EQ(flat.at("modules[2].path"), "\"Net/encoder/attn \\\"q\\\"\\\\\"");
  EXPECT_EQ(flat.at("modules[2].params"), "null");
  EXPECT_EQ(flat.at("modules[3].path"), "\"Net/head\"");
}

TEST(RenderReportJsonTest, GpuFiguresAppearWhenPresent) {
  PARSE_OR_SKIP(flat, testing::GpuReport());
  EXPECT_EQ(flat.at("modules[0].gpu_time_s"), "0.007");
  EXPECT_EQ(flat.at("modules[0].kernels"), "40");
  EXPECT_EQ(flat.at("modules[0].flops"), "2500000000000.0");  // Python prints floats with ".0"
  EXPECT_EQ(flat.at("modules[1].flops"), "null");
}

TEST(RenderReportJsonTest, KernelFiguresDevicesAndTopKernels) {
  flopscope::v1::Report report = testing::GpuReport();
  flopscope::v1::ModuleStats& net = *report.mutable_modules(0);
  net.set_gpu_span_ns(9'000'000);
  net.set_gpu_busy_ns(6'500'000);
  net.set_memcpy_count(3);
  net.set_memcpy_time_ns(120'000);
  net.set_memcpy_bytes(1 << 20);
  flopscope::v1::Device* device = report.mutable_ranks(0)->add_devices();
  device->set_index(0);
  device->set_name("NVIDIA H100 80GB HBM3");
  device->set_chip("GH100");
  device->set_sm_count(132);
  report.set_top_kernels_of("Net");
  flopscope::v1::KernelSummary* kernel = report.add_top_kernels();
  kernel->set_name("_Z4gemmPfS_i");
  kernel->set_demangled("gemm(float*, float*, int)");
  kernel->set_count(40);
  kernel->set_total_ns(6'000'000);
  flopscope::v1::KernelSummary* copy = report.add_top_kernels();
  copy->set_name("[memcpy]");
  copy->set_kind(flopscope::v1::ACTIVITY_KIND_MEMCPY);
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("modules[0].gpu_span_s"), "0.009");
  EXPECT_EQ(flat.at("modules[0].gpu_busy_s"), "0.0065");
  EXPECT_EQ(flat.at("modules[0].memcpy.count"), "3");
  EXPECT_EQ(flat.at("modules[0].memcpy.time_s"), "0.00012");
  EXPECT_EQ(flat.at("modules[0].memcpy.bytes"), "1048576");
  EXPECT_EQ(flat.at("ranks[0].devices[0].chip"), "\"GH100\"");
  EXPECT_EQ(flat.at("ranks[0].devices[0].sm_count"), "132");
  EXPECT_EQ(flat.at("top_kernels_of"), "\"Net\"");
  EXPECT_EQ(flat.at("top_kernels#"), "2");
  EXPECT_EQ(flat.at("top_kernels[0].demangled"), "\"gemm(float*, float*, int)\"");
  EXPECT_EQ(flat.at("top_kernels[0].kind"), "\"kernel\"");
  EXPECT_EQ(flat.at("top_kernels[0].total_s"), "0.006");
  EXPECT_EQ(flat.at("top_kernels[1].kind"), "\"memcpy\"");
}

TEST(RenderReportJsonTest, RanksPhasesAndLosses) {
  PARSE_OR_SKIP(flat, testing::CpuOnlyReport());
  EXPECT_EQ(flat.at("ranks[0]#"), "9");
  EXPECT_EQ(flat.at("ranks[0].sessions_without_final"), "0");
  EXPECT_EQ(flat.at("ranks[0].spooled"), "0");
  EXPECT_EQ(flat.at("ranks[0].rejected.records"), "0");
  EXPECT_EQ(flat.at("ranks[0].devices#"), "0");
  EXPECT_EQ(flat.at("ranks[0].rank"), "0");
  EXPECT_EQ(flat.at("ranks[0].host"), "\"node-a\"");
  EXPECT_EQ(flat.at("ranks[0].pid"), "101");
  EXPECT_EQ(flat.at("ranks[0].gpu_status"), "\"no CUDA driver: NVTX ranges only\"");
  EXPECT_EQ(flat.at("ranks[0].losses.buffer_full"), "3");
  EXPECT_EQ(flat.at("ranks[1].losses#"), "0");
  EXPECT_EQ(flat.at("phases[0]#"), "8");
  EXPECT_EQ(flat.at("phases[0].flops"), "null");
  EXPECT_EQ(flat.at("phases[0].flops_by_precision#"), "0");
  EXPECT_EQ(flat.at("phases[0].name"), "\"step\"");
  EXPECT_EQ(flat.at("phases[0].calls"), "2");
  EXPECT_EQ(flat.at("phases[0].cpu_time_s"), "0.009");
  EXPECT_EQ(flat.at("phases[0].min_s"), "0.004");
  EXPECT_EQ(flat.at("phases[0].max_s"), "0.005");
  EXPECT_EQ(flat.at("phases[1].name"), "\"forward\"");
  EXPECT_EQ(flat.at("losses.buffer_full"), "3");
}

TEST(RenderReportJsonTest, CountedFlopsPhasesWindowsAndTheFp16Convention) {
  flopscope::v1::Report report = testing::GpuReport();
  flopscope::v1::ModuleStats& net = *report.mutable_modules(0);
  net.set_counted_steps(3);
  net.set_counted_kernels(12);
  for (const auto& [precision, flops] :
       {std::pair<const char*, double>{"tensor:bf16_dst_fp32", 2e12}, {"fp32", 5e11}}) {
    flopscope::v1::PrecisionFlops* entry = net.add_flops_by_precision();
    entry->set_precision(precision);
    entry->set_flops(flops);
  }
  flopscope::v1::PhaseStats& forward = *report.mutable_phases(1);
  forward.set_flops(1.5e12);
  forward.set_median_ns(1'500'000);
  *forward.add_flops_by_precision() = net.flops_by_precision(1);
  flopscope::v1::RankCounterWindow* entry = report.add_counter_windows();
  entry->set_rank(1);
  flopscope::v1::CounterWindowRecord* window = entry->mutable_window();
  window->set_first_step(3);
  window->set_last_step(4);
  window->set_trigger("env: steps=3-4");
  window->set_metric_set("full");
  window->set_chip("GH100");
  window->set_passes(3);
  window->set_kernels_counted(12);
  window->set_ranges_unmatched(1);
  window->set_status("");
  report.set_fp16_convention("ncu-packed-half");
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("modules[0].counted_steps"), "3");
  EXPECT_EQ(flat.at("modules[0].counted_kernels"), "12");
  EXPECT_EQ(flat.at("modules[0].flops_by_precision#"), "2");
  EXPECT_EQ(flat.at("modules[0].flops_by_precision[0].precision"), "\"tensor:bf16_dst_fp32\"");
  EXPECT_EQ(flat.at("modules[0].flops_by_precision[0].flops"), "2000000000000.0");
  EXPECT_EQ(flat.at("modules[0].flops_by_precision[1].precision"), "\"fp32\"");
  EXPECT_EQ(flat.at("phases[1].flops"), "1500000000000.0");
  EXPECT_EQ(flat.at("phases[1].median_s"), "0.0015");
  EXPECT_EQ(flat.at("phases[1].flops_by_precision[0].flops"), "500000000000.0");
  EXPECT_EQ(flat.at("phases[0].flops"), "null");
  EXPECT_EQ(flat.at("counter_windows#"), "1");
  EXPECT_EQ(flat.at("counter_windows[0]#"), "12");
  EXPECT_EQ(flat.at("counter_windows[0].rank"), "1");
  EXPECT_EQ(flat.at("counter_windows[0].first_step"), "3");
  EXPECT_EQ(flat.at("counter_windows[0].last_step"), "4");
  EXPECT_EQ(flat.at("counter_windows[0].trigger"), "\"env: steps=3-4\"");
  EXPECT_EQ(flat.at("counter_windows[0].chip"), "\"GH100\"");
  EXPECT_EQ(flat.at("counter_windows[0].passes"), "3");
  EXPECT_EQ(flat.at("counter_windows[0].ranges_unmatched"), "1");
  EXPECT_EQ(flat.at("counter_windows[0].status"), "\"\"");
  EXPECT_EQ(flat.at("fp16_convention"), "\"ncu-packed-half\"");
}

TEST(RenderReportJsonTest, RepeatedLossCausesAreSummedAndUnknownCausesNamed) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  auto* again = report.add_losses();
  again->set_cause(flopscope::v1::LOSS_CAUSE_BUFFER_FULL);
  again->set_records(4);
  auto* future = report.add_losses();
  future->set_cause(static_cast<flopscope::v1::LossCause>(42));
  future->set_records(1);
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("losses#"), "2");
  EXPECT_EQ(flat.at("losses.buffer_full"), "7");
  EXPECT_EQ(flat.at("losses.cause_42"), "1");
}

TEST(RenderReportJsonTest, SessionsWithoutFinalAreNotRecords) {
  flopscope::v1::Report report = testing::CpuOnlyReport();
  auto* flag = report.add_losses();
  flag->set_cause(flopscope::v1::LOSS_CAUSE_ENDED_WITHOUT_FINAL);
  flag->set_records(2);
  auto* missing = report.add_losses();
  missing->set_cause(flopscope::v1::LOSS_CAUSE_NOT_ARRIVED);
  missing->set_records(5);
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("sessions_without_final"), "2");
  EXPECT_EQ(flat.at("losses.not_arrived"), "5");
  EXPECT_EQ(flat.count("losses.ended_without_final"), 0u);
}

TEST(RenderReportJsonTest, EmptyReportIsStillTheSameShape) {
  flopscope::v1::Report report;
  report.set_job_id("empty");
  PARSE_OR_SKIP(flat, report);
  EXPECT_EQ(flat.at("#"), "11");
  EXPECT_EQ(flat.at("modules#"), "0");
  EXPECT_EQ(flat.at("losses#"), "0");
}

}  // namespace
}  // namespace flopscope::client
