// The real per-kernel counters Kineto recorded with CUPTI's range profiler (HolisticTraceAnalysis
// test data: 77 `cuda_profiler_range` events, nine `smsp__sass_thread_inst_executed_op_*` values
// each) through FlopsFromCounters, against sums computed here straight from the events' args.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "counters/kernel_flop_values.h"

namespace flopscope::counters {
namespace {

constexpr char kTrace[] =
    "HolisticTraceAnalysis/tests/data/cupti_profiler/"
    "benchmark_result_924719_1679055439_trace.json.gz";

std::string SharedDataDir() {
  const char* dir = std::getenv("FLOPSCOPE_SHARED_DATA_DIR");
  return dir != nullptr ? dir : "";
}

std::string Gunzip(const std::string& path) {
  std::string data;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return data;
  char chunk[1 << 16];
  int got = 0;
  while ((got = gzread(file, chunk, sizeof chunk)) > 0) data.append(chunk, got);
  gzclose(file);
  return data;
}

// One event's counters, by the op name in the middle of the metric ("ffma").
using OpCounts = std::map<std::string, double>;

struct RangeEvent {
  std::vector<std::string> metrics;
  std::vector<double> values;
  OpCounts by_op;
};

std::string OpOf(const std::string& metric) {
  const std::string prefix = "smsp__sass_thread_inst_executed_op_";
  const size_t end = metric.find("_pred_on.sum");
  if (metric.rfind(prefix, 0) != 0 || end == std::string::npos) return "";
  return metric.substr(prefix.size(), end - prefix.size());
}

std::vector<RangeEvent> ReadRangeEvents(const std::string& path) {
  std::vector<RangeEvent> events;
  const std::string text = Gunzip(path);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (text.empty() || parser.parse(text).get(root) != simdjson::SUCCESS) return events;
  simdjson::dom::array trace_events;
  if (root["traceEvents"].get_array().get(trace_events) != simdjson::SUCCESS) return events;
  for (simdjson::dom::element event : trace_events) {
    std::string_view category;
    if (event["cat"].get_string().get(category) != simdjson::SUCCESS ||
        category != "cuda_profiler_range") {
      continue;
    }
    RangeEvent range;
    simdjson::dom::object args;
    if (event["args"].get_object().get(args) != simdjson::SUCCESS) continue;
    for (auto [key, value] : args) {
      double number = 0;
      if (value.get_double().get(number) != simdjson::SUCCESS) {
        int64_t integer = 0;
        if (value.get_int64().get(integer) != simdjson::SUCCESS) continue;
        number = static_cast<double>(integer);
      }
      range.metrics.emplace_back(key);
      range.values.push_back(number);
      range.by_op[OpOf(std::string(key))] += number;
    }
    events.push_back(std::move(range));
  }
  return events;
}

TEST(KinetoCountersTest, FlopsPerPrecisionMatchTheArgsSummedDirectly) {
  if (SharedDataDir().empty()) GTEST_SKIP() << "FLOPSCOPE_SHARED_DATA_DIR is not set: skipping";
  const std::string path = SharedDataDir() + "/" + kTrace;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    GTEST_SKIP() << "shared fixture " << path << " not found (../shared/data absent): skipping";
  }
  const std::vector<RangeEvent> events = ReadRangeEvents(path);
  ASSERT_EQ(events.size(), 77u) << "the fixture holds 77 cuda_profiler_range events";

  double fp64 = 0, fp32 = 0, fp16 = 0, total = 0;
  double want_fp64 = 0, want_fp32 = 0, want_fp16 = 0;
  for (const RangeEvent& event : events) {
    ASSERT_EQ(event.metrics.size(), 9u);
    const KernelFlopValues flops = FlopsFromCounters(event.metrics, event.values);
    EXPECT_TRUE(flops.tensor.empty());  // this trace has no ops_path counters
    EXPECT_EQ(flops.raw.size(), event.metrics.size());
    fp64 += flops.fp64;
    fp32 += flops.fp32;
    fp16 += flops.fp16;
    total += flops.total();
    OpCounts n = event.by_op;
    want_fp64 += n["dadd"] + n["dmul"] + 2 * n["dfma"];
    want_fp32 += n["fadd"] + n["fmul"] + 2 * n["ffma"];
    want_fp16 += 2 * n["hadd"] + 2 * n["hmul"] + 4 * n["hfma"];
  }
  EXPECT_DOUBLE_EQ(fp64, want_fp64);
  EXPECT_DOUBLE_EQ(fp32, want_fp32);
  EXPECT_DOUBLE_EQ(fp16, want_fp16);
  EXPECT_DOUBLE_EQ(total, want_fp64 + want_fp32 + want_fp16);
  // The recording did real FP32 and half work: a reader that saw only zeros would pass the
  // equalities above vacuously.
  EXPECT_GT(want_fp32, 0);
  EXPECT_GT(want_fp16, 0);
}

}  // namespace
}  // namespace flopscope::counters
