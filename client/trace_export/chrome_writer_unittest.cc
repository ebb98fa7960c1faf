// The Chrome trace-event export parsed back by an independent parser (python3's json): one `X`
// event per range and activity, nested as the ranges were, flows pairing each launch range with
// its activity, metadata names and counters, all checked against the sample trace's fields.
#include "client/trace_export/chrome_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "client/testing/json_parse_for_test.h"
#include "client/trace_export/testing/sample_trace.h"

namespace flopscope::client {
namespace {

using Flat = std::map<std::string, std::string>;

// Event i's field, or "" when absent.
std::string Field(const Flat& json, int i, const std::string& field) {
  auto it = json.find("traceEvents[" + std::to_string(i) + "]." + field);
  return it == json.end() ? "" : it->second;
}

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

class ChromeWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Flat> parsed =
        testing::FlattenJson(testing::WriteSampleTrace<ChromeWriter>("chrome-writer-test"));
    if (absl::IsUnavailable(parsed.status())) GTEST_SKIP() << parsed.status();
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    json_ = *parsed;
    events_ = std::stoi(json_.at("traceEvents#"));
  }
  // Indices of the events with this phase.
  std::vector<int> WithPhase(const std::string& phase) const {
    std::vector<int> found;
    for (int i = 0; i < events_; ++i) {
      if (Field(json_, i, "ph") == Quoted(phase)) found.push_back(i);
    }
    return found;
  }
  int ByArg(const std::string& arg, uint64_t value) const {
    int found = -1;
    for (int i : WithPhase("X")) {
      if (Field(json_, i, "args." + arg) != std::to_string(value)) continue;
      EXPECT_EQ(found, -1) << arg << " " << value << " appears twice";
      found = i;
    }
    return found;
  }
  double Ts(int i) const { return std::stod(Field(json_, i, "ts")); }
  double End(int i) const { return Ts(i) + std::stod(Field(json_, i, "dur")); }

  Flat json_;
  int events_ = 0;
  const std::vector<v1::TraceChunk> sample_ = testing::SampleTrace();
};

TEST_F(ChromeWriterTest, EveryRangeOnceNestedUnderItsParent) {
  const int64_t base = std::stoll(json_.at("baseTimeNanoseconds"));
  for (const v1::TraceRange& range : sample_[1].ranges()) {
    const v1::RangeEvent& event = range.event();
    const int i = ByArg("instance", event.instance_id());
    ASSERT_GE(i, 0) << "instance " << event.instance_id() << " missing";
    EXPECT_NEAR(Ts(i), static_cast<double>(event.start_ns() - base) / 1000, 1e-6);
    EXPECT_NEAR(End(i), static_cast<double>(event.end_ns() - base) / 1000, 1e-6);
    // The parent: the innermost other range on the same thread that encloses this one.
    int parent = -1;
    for (int j : WithPhase("X")) {
      if (j == i || Field(json_, j, "tid") != Field(json_, i, "tid")) continue;
      if (Field(json_, j, "args.instance").empty()) continue;
      if (Ts(j) <= Ts(i) && End(i) <= End(j) && (parent < 0 || Ts(j) >= Ts(parent))) parent = j;
    }
    const std::string parent_instance = parent < 0 ? "0" : Field(json_, parent, "args.instance");
    EXPECT_EQ(parent_instance, std::to_string(event.parent_instance_id()));
  }
  EXPECT_EQ(Field(json_, ByArg("instance", 3), "args.path"), Quoted("model/layer"));
  EXPECT_EQ(Field(json_, ByArg("instance", 1), "cat"), Quoted("phase"));
}

TEST_F(ChromeWriterTest, EveryActivityOnceWithItsFlowFromItsRange) {
  std::map<std::string, int> starts, finishes;  // flow id -> event
  for (int i : WithPhase("s")) starts[Field(json_, i, "id")] = i;
  for (int i : WithPhase("f")) finishes[Field(json_, i, "id")] = i;
  int flows = 0;
  for (const v1::TraceActivity& activity : sample_[1].activities()) {
    const int i = ByArg("key", activity.key());
    ASSERT_GE(i, 0) << "activity " << activity.key() << " missing";
    EXPECT_EQ(Field(json_, i, "tid"), std::to_string((1 << 30) + 7));
    if (!activity.flow()) continue;
    ++flows;
    const int range = ByArg("instance", activity.kernel().range_instance_id());
    bool paired = false;
    for (const auto& [id, finish] : finishes) {
      if (Ts(finish) != Ts(i) || !starts.count(id)) continue;
      const int start = starts.at(id);
      paired = Field(json_, start, "tid") == Field(json_, range, "tid") && Ts(start) == Ts(range);
    }
    EXPECT_TRUE(paired) << "no flow from instance " << activity.kernel().range_instance_id();
    EXPECT_EQ(Field(json_, i, "args.module"), Field(json_, range, "args.path"));
  }
  EXPECT_EQ(static_cast<int>(starts.size()), flows);
  EXPECT_EQ(static_cast<int>(finishes.size()), flows);
  EXPECT_EQ(Field(json_, ByArg("key", 10), "name"), Quoted("gemm_kernel"));
  EXPECT_EQ(Field(json_, ByArg("key", 11), "cat"), Quoted("memcpy"));
}

TEST_F(ChromeWriterTest, MetadataAndCounters) {
  std::map<std::string, std::string> thread_names;
  for (int i : WithPhase("M")) {
    if (Field(json_, i, "name") == Quoted("thread_name")) {
      thread_names[Field(json_, i, "tid")] = Field(json_, i, "args.name");
    }
  }
  EXPECT_EQ(thread_names.at("11"), Quoted("thread 11"));
  EXPECT_EQ(thread_names.at(std::to_string((1 << 30) + 7)), Quoted("GPU 0 stream 7"));
  EXPECT_EQ(thread_names.at(std::to_string((1 << 29) + 11)), Quoted("steps & phases (thread 11)"));
  const v1::RangeEvent& step = sample_[1].ranges(0).event();
  bool step_time = false;
  for (int i : WithPhase("C")) {
    if (Field(json_, i, "name") != Quoted("step time")) continue;
    step_time = true;
    EXPECT_DOUBLE_EQ(std::stod(Field(json_, i, "args.ms")),
                     static_cast<double>(step.end_ns() - step.start_ns()) / 1e6);
  }
  EXPECT_TRUE(step_time);
}

}  // namespace
}  // namespace flopscope::client
