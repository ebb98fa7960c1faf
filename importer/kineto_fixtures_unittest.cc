// The importer against real Kineto traces from ../shared/data. Every expected value is computed
// here from the raw file with a different code path (the whole document decompressed by gzread
// and parsed at once by simdjson's DOM, plain loops, Python parent ids), never typed in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "importer/import_assembler.h"
#include "importer/testing/shared_data.h"
#include "importer/testing/trace_facts.h"
#include "importer/trace_reader.h"

namespace flopscope::importer {
namespace {

using ::flopscope::importer::testing::TraceFacts;

constexpr char kQwen[] = "TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz";
constexpr char kEager[] = "TraceLens/tests/traces/b200/eager_trace.json.gz";
constexpr char kAlexnet[] =
    "HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
    "benchmark_result_2869224_1695835535_trace.json.gz";
constexpr char kCounters[] =
    "HolisticTraceAnalysis/tests/data/cupti_profiler/"
    "benchmark_result_924719_1679055439_trace.json.gz";
constexpr char kNccl[] = "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz";
constexpr char kRank0[] =
    "HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz";
constexpr char kNsResolution[] =
    "HolisticTraceAnalysis/tests/data/ns_resolution_trace/"
    "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz";
constexpr char kSampled0[] = "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz";
constexpr char kSampled1[] = "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz";
constexpr char kCpuOnly[] =
    "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
constexpr char kTriton[] = "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz";
constexpr char kLegacy[] =
    "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz";

ImportPlan Import(const std::string& path, int32_t rank = 0) {
  absl::StatusOr<TraceRecording> recording = ReadTrace(path, nullptr);
  EXPECT_TRUE(recording.ok()) << recording.status();
  if (!recording.ok()) return {};
  absl::StatusOr<ImportPlan> plan =
      ImportAssembler::Assemble(*std::move(recording), {"job", rank, absl::Now()});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : ImportPlan();
}

std::string MetadataValue(const ImportPlan& plan, const std::string& key) {
  for (const v1::Metadata& entry : plan.metadata) {
    if (entry.key() == key) return entry.value();
  }
  return "<absent>";
}

// Full path names of the plan's paths, by id.
std::map<uint64_t, std::string> PathNames(const ImportPlan& plan) {
  std::map<uint64_t, std::string> names;
  for (const v1::RangePath& path : plan.paths) {
    const auto parent = names.find(path.parent_id());
    names[path.id()] = parent == names.end() ? path.name() : parent->second + "/" + path.name();
  }
  return names;
}

class EveryKinetoFixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryKinetoFixtureTest, KernelCountsAndSummedTimeMatchTheFile) {
  SKIP_WITHOUT_SHARED_DATA(path, GetParam());
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  EXPECT_EQ(plan.counts.kernels, facts.kernels().size());
  EXPECT_EQ(plan.counts.memcpys, facts.CountCategory({"gpu_memcpy", "Memcpy"}));
  EXPECT_EQ(plan.counts.memsets, facts.CountCategory({"gpu_memset", "Memset"}));
  int64_t imported_ns = 0;
  for (const GpuActivity& activity : plan.recording.activities) {
    if (activity.kind == v1::ACTIVITY_KIND_KERNEL)
      imported_ns += activity.end_ns - activity.start_ns;
  }
  int64_t expected_ns = 0;
  for (const TraceFacts::Event& kernel : facts.kernels()) expected_ns += kernel.dur_ns;
  // Each duration is exact in the importer (decimal text) and rounded from a double here.
  EXPECT_NEAR(static_cast<double>(imported_ns), static_cast<double>(expected_ns),
              static_cast<double>(facts.kernels().size()));
}

TEST_P(EveryKinetoFixtureTest, AttributionCoverageMatchesABruteForceSearch) {
  SKIP_WITHOUT_SHARED_DATA(path, GetParam());
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  uint64_t expected_attributed = 0;
  for (const TraceFacts::Event& kernel : facts.kernels()) {
    if (facts.InnermostModuleAtLaunch(kernel) != nullptr) ++expected_attributed;
  }
  EXPECT_EQ(plan.counts.attributed_kernels, expected_attributed);
  EXPECT_EQ(MetadataValue(plan, "import.unattributed_kernels"),
            std::to_string(facts.kernels().size() - expected_attributed));
}

TEST_P(EveryKinetoFixtureTest, EveryTimestampLiesInTheDaemonsWindow) {
  SKIP_WITHOUT_SHARED_DATA(path, GetParam());
  const ImportPlan plan = Import(path);
  const int64_t earliest =
      absl::ToUnixNanos(absl::FromCivil(absl::CivilDay(2000, 1, 1), absl::UTCTimeZone()));
  const int64_t latest = absl::ToUnixNanos(absl::Now() + absl::Hours(24));
  for (const PlannedRange& range : plan.ranges) {
    ASSERT_GE(range.start_ns + plan.time_offset_ns, earliest);
    ASSERT_LE(range.end_ns + plan.time_offset_ns, latest);
  }
  for (const GpuActivity& activity : plan.recording.activities) {
    ASSERT_GE(activity.start_ns + plan.time_offset_ns, earliest);
    ASSERT_LE(activity.end_ns + plan.time_offset_ns, latest);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedData, EveryKinetoFixtureTest,
                         ::testing::Values(kQwen, kEager, kAlexnet, kNccl, kRank0, kNsResolution,
                                           kSampled0, kSampled1, kCpuOnly, kTriton, kLegacy));

TEST(KinetoModulesTest, ModuleTreeFollowsPythonParentIds) {
  SKIP_WITHOUT_SHARED_DATA(path, kQwen);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  const std::map<uint64_t, std::string> names = PathNames(plan);
  std::map<std::string, uint64_t> imported_calls;
  for (const PlannedRange& range : plan.ranges) {
    const v1::RangePath& path_def = plan.paths[range.path_id - 1];
    if (path_def.domain().empty()) ++imported_calls[names.at(range.path_id)];
  }
  std::map<std::string, uint64_t> expected_calls;
  for (const TraceFacts::Event* module : facts.modules()) {
    ++expected_calls[facts.ModulePathByParentIds(*module)];
  }
  EXPECT_EQ(imported_calls, expected_calls);
  EXPECT_TRUE(
      expected_calls.contains("Qwen2Model_0/Qwen2DecoderLayer_0/Qwen2Attention_0/Linear_0"));
}

TEST(KinetoModulesTest, EachKernelGoesToTheInnermostModuleOfItsLaunch) {
  SKIP_WITHOUT_SHARED_DATA(path, kQwen);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  const std::map<uint64_t, std::string> names = PathNames(plan);
  // Kernels in file order on both sides.
  std::vector<std::string> imported;
  for (size_t i = 0; i < plan.recording.activities.size(); ++i) {
    if (plan.recording.activities[i].kind != v1::ACTIVITY_KIND_KERNEL) continue;
    const uint64_t path_id = plan.attributions[i].path_id;
    imported.push_back(path_id == 0 ? "" : names.at(path_id));
  }
  std::vector<std::string> expected;
  for (const TraceFacts::Event& kernel : facts.kernels()) {
    const TraceFacts::Event* module = facts.InnermostModuleAtLaunch(kernel);
    expected.push_back(module == nullptr ? "" : facts.ModulePathByParentIds(*module));
  }
  EXPECT_EQ(imported, expected);
  EXPECT_GT(plan.counts.kernels_without_launch, 0u) << "the fixture has kernels without launch";
}

TEST(KinetoRanksTest, RanksAndWorldSizeComeFromDistributedInfo) {
  SKIP_WITHOUT_SHARED_DATA(rank0_path, kSampled0);
  SKIP_WITHOUT_SHARED_DATA(rank1_path, kSampled1);
  for (const std::string& path : {rank0_path, rank1_path}) {
    const TraceFacts facts(path);
    ASSERT_TRUE(facts.ok());
    absl::StatusOr<TraceRecording> recording = ReadTrace(path, nullptr);
    ASSERT_TRUE(recording.ok()) << recording.status();
    EXPECT_EQ(recording->rank, facts.DistributedInt("rank"));
    EXPECT_EQ(recording->world_size, facts.DistributedInt("world_size"));
  }
}

TEST(KinetoRanksTest, CpuOnlyRankHasNoGpuActivity) {
  SKIP_WITHOUT_SHARED_DATA(path, kCpuOnly);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path, *facts.DistributedInt("rank"));
  EXPECT_EQ(plan.hello.rank(), facts.DistributedInt("rank"));
  EXPECT_EQ(plan.hello.world_size(), facts.DistributedInt("world_size"));
  EXPECT_TRUE(plan.recording.activities.empty());
  EXPECT_FALSE(plan.hello.gpu_status().empty());
  EXPECT_EQ(plan.counts.ranges, facts.CountCategory({"user_annotation"}));
}

TEST(KinetoDevicesTest, DevicesComeFromDeviceProperties) {
  SKIP_WITHOUT_SHARED_DATA(path, kQwen);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  ASSERT_EQ(plan.hello.devices_size(), 1);
  const simdjson::dom::element device = facts.Device(0);
  EXPECT_EQ(plan.hello.devices(0).name(), std::string(device["name"].get_string().value()));
  EXPECT_EQ(plan.hello.devices(0).sm_count(), device["numSms"].get_int64().value());
  EXPECT_EQ(
      plan.hello.devices(0).compute_capability(),
      device["computeMajor"].get_int64().value() * 10 + device["computeMinor"].get_int64().value());
}

TEST(KinetoStepsTest, StepsAndPhasesComeFromAnnotations) {
  SKIP_WITHOUT_SHARED_DATA(path, kNccl);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  std::map<std::string, uint64_t> flopscope_calls;
  for (const PlannedRange& range : plan.ranges) {
    const v1::RangePath& def = plan.paths[range.path_id - 1];
    if (def.domain() == "flopscope") ++flopscope_calls[def.name()];
  }
  EXPECT_EQ(flopscope_calls["step"], facts.CountAnnotationsNamed("ProfilerStep#", true));
  EXPECT_EQ(flopscope_calls["forward"], facts.CountAnnotationsNamed("## forward ##", false));
  EXPECT_EQ(flopscope_calls["backward"], facts.CountAnnotationsNamed("## backward ##", false));
  EXPECT_EQ(flopscope_calls["optimizer"], facts.CountAnnotationsNamed("## optimizer ##", false));
  // Steps and phases never parent a module path.
  for (const v1::RangePath& def : plan.paths) {
    if (def.parent_id() == 0) continue;
    EXPECT_EQ(plan.paths[def.parent_id() - 1].domain(), def.domain()) << def.name();
  }
}

TEST(KinetoLegacyTest, LegacyCategoryNamesAreUnderstood) {
  SKIP_WITHOUT_SHARED_DATA(path, kLegacy);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  EXPECT_EQ(plan.recording.format, "kineto-json-legacy");
  EXPECT_EQ(plan.counts.kernels, facts.CountCategory({"Kernel"}));
  uint64_t steps = 0;
  for (const PlannedRange& range : plan.ranges) {
    if (plan.paths[range.path_id - 1].name() == "step") ++steps;
  }
  EXPECT_EQ(steps, facts.CountAnnotationsNamed("ProfilerStep#", true));
  // Every kernel's launch is in the file.
  EXPECT_EQ(plan.counts.kernels_without_launch, 0u);
}

TEST(KinetoTimeTest, NanosecondFractionsSurvive) {
  SKIP_WITHOUT_SHARED_DATA(path, kNsResolution);
  const ImportPlan plan = Import(path);
  EXPECT_EQ(plan.time_offset_ns, 0) << "this trace is in epoch microseconds already";
  // The first kernel event's ts, taken from the file's text by hand.
  const std::string text = testing::ReadWholeFile(path);
  const size_t kernel = text.find("\"cat\": \"kernel\"");
  ASSERT_NE(kernel, std::string::npos);
  const size_t event_start = text.rfind('{', kernel);
  const size_t ts = text.find("\"ts\": ", event_start);
  const size_t digits = ts + 6;
  const size_t end = text.find_first_of(",}", digits);
  const std::string micros = text.substr(digits, end - digits);
  const size_t dot = micros.find('.');
  std::string fraction = dot == std::string::npos ? "" : micros.substr(dot + 1);
  ASSERT_GE(fraction.size(), 1u) << "the fixture is expected to carry fractions";
  fraction = (fraction + "000").substr(0, 3);
  const int64_t expected = std::stoll(micros.substr(0, dot)) * 1000 + std::stoll(fraction);
  const GpuActivity* first = nullptr;
  for (const GpuActivity& activity : plan.recording.activities) {
    if (activity.kind == v1::ACTIVITY_KIND_KERNEL) {
      first = &activity;
      break;
    }
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->start_ns, expected);
}

TEST(KinetoTimeTest, RelativeClocksAddBaseTimeNanoseconds) {
  SKIP_WITHOUT_SHARED_DATA(path, kQwen);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  EXPECT_EQ(plan.time_offset_ns, facts.root()["baseTimeNanoseconds"].get_int64().value());
}

TEST(KinetoCountersTest, CounterRangesBecomeFlopsByTheSharedFormula) {
  SKIP_WITHOUT_SHARED_DATA(path, kCounters);
  const TraceFacts facts(path);
  ASSERT_TRUE(facts.ok());
  const ImportPlan plan = Import(path);
  // Expected: the formula of cupti.md §1.1 applied here to the raw counters.
  double expected_fp32 = 0, expected_fp64 = 0, expected_fp16 = 0;
  uint64_t samples = 0;
  for (const TraceFacts::Event& event : facts.events()) {
    if (event.cat != "cuda_profiler_range") continue;
    ++samples;
    const auto counter = [&event](const char* op) {
      return event.args.at(std::string("smsp__sass_thread_inst_executed_op_") + op +
                           "_pred_on.sum");
    };
    expected_fp64 += counter("dadd") + counter("dmul") + 2 * counter("dfma");
    expected_fp32 += counter("fadd") + counter("fmul") + 2 * counter("ffma");
    expected_fp16 += 2 * counter("hadd") + 2 * counter("hmul") + 4 * counter("hfma");
  }
  ASSERT_GT(samples, 0u);
  double fp32 = 0, fp64 = 0, fp16 = 0;
  for (const auto& [index, flops] : plan.flops) {
    fp32 += flops.fp32();
    fp64 += flops.fp64();
    fp16 += flops.fp16();
    EXPECT_EQ(flops.raw_size(), 9);
  }
  EXPECT_EQ(plan.flops.size(), samples);
  EXPECT_DOUBLE_EQ(fp32, expected_fp32);
  EXPECT_DOUBLE_EQ(fp64, expected_fp64);
  EXPECT_DOUBLE_EQ(fp16, expected_fp16);
  EXPECT_GT(fp32, 0);
  EXPECT_NE(MetadataValue(plan, "import.fp16_convention"), "<absent>");
  // A kernel record per sample, joined to the launches in order (one launch per sample), so
  // each lands in the annotation that encloses its launch.
  EXPECT_EQ(plan.counts.kernels, samples);
  uint64_t launches = 0;
  uint64_t launches_in_modules = 0;
  for (const TraceFacts::Event& event : facts.events()) {
    if (event.cat != "cuda_runtime" || event.name != "cudaLaunchKernel") continue;
    ++launches;
    for (const TraceFacts::Event& outer : facts.events()) {
      if (outer.cat == "user_annotation" && outer.tid == event.tid && outer.ts_ns <= event.ts_ns &&
          event.ts_ns <= outer.ts_ns + outer.dur_ns) {
        ++launches_in_modules;
        break;
      }
    }
  }
  ASSERT_EQ(launches, samples);
  EXPECT_EQ(plan.counts.attributed_kernels, launches_in_modules);
  EXPECT_GT(launches_in_modules, 0u);
}

}  // namespace
}  // namespace flopscope::importer
