#include "importer/json_event_splitter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "importer/testing/temp_dir.h"

namespace flopscope::importer {
namespace {

using ::testing::HasSubstr;

class Recorder final : public JsonTraceVisitor {
 public:
  absl::Status OnEvent(absl::string_view json, uint64_t offset) override {
    events.emplace_back(json);
    offsets.push_back(offset);
    return absl::OkStatus();
  }
  absl::Status OnMember(absl::string_view key, absl::string_view json, uint64_t) override {
    members[std::string(key)] = std::string(json);
    return absl::OkStatus();
  }
  std::vector<std::string> events;
  std::vector<uint64_t> offsets;
  std::map<std::string, std::string> members;
};

class JsonEventSplitterTest : public ::testing::Test {
 protected:
  absl::Status Split(const std::string& text) {
    const std::string path = dir_.File("trace.json");
    std::ofstream(path, std::ios::binary) << text;
    absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path);
    if (!source.ok()) return source.status();
    recorder_ = Recorder();
    return JsonEventSplitter(source->get(), &recorder_).Run();
  }
  testing::TempDir dir_;
  Recorder recorder_;
};

TEST_F(JsonEventSplitterTest, SplitsEventsAndMembersInAnyOrder) {
  const std::string text =
      "{\"schemaVersion\": 1, \"traceEvents\": [ {\"a\": 1} ,{\"b\": [1, {\"c\": \"}]\"}]}\n],"
      " \"deviceProperties\": [{\"id\": 0}], \"baseTimeNanoseconds\": 17}";
  ASSERT_TRUE(Split(text).ok());
  EXPECT_THAT(recorder_.events,
              ::testing::ElementsAre("{\"a\": 1}", "{\"b\": [1, {\"c\": \"}]\"}]}"));
  EXPECT_EQ(recorder_.offsets[0], text.find("{\"a\""));
  EXPECT_EQ(recorder_.members["schemaVersion"], "1");
  EXPECT_EQ(recorder_.members["deviceProperties"], "[{\"id\": 0}]");
  EXPECT_EQ(recorder_.members["baseTimeNanoseconds"], "17");
}

TEST_F(JsonEventSplitterTest, EscapedQuotesDoNotEndStrings) {
  ASSERT_TRUE(Split(R"([{"n": "a\"}\\"}, {"n": "\\\\"}])").ok());
  EXPECT_THAT(recorder_.events, ::testing::ElementsAre(R"({"n": "a\"}\\"})", R"({"n": "\\\\"})"));
}

TEST_F(JsonEventSplitterTest, EventsLargerThanAChunkAndAcrossChunks) {
  std::string text = "{\"traceEvents\": [";
  const std::string big = "{\"name\": \"" + std::string(3 << 20, 'x') + "\"}";
  text += big;
  for (int i = 0; i < 100000; ++i) text += ",{\"i\": " + std::to_string(i) + "}";
  text += "]}";
  ASSERT_TRUE(Split(text).ok());
  ASSERT_EQ(recorder_.events.size(), 100001u);
  EXPECT_EQ(recorder_.events[0], big);
  EXPECT_EQ(recorder_.events[100000], "{\"i\": 99999}");
  EXPECT_EQ(recorder_.offsets[100000], text.rfind("{\"i\""));
}

TEST_F(JsonEventSplitterTest, StructuralErrorsNameTheirOffset) {
  struct Case {
    std::string text;
    std::string problem;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"traceEvents\": [{\"a\": 1},]}", "offset 26: an element of the event array"},
           {"{\"traceEvents\": [{\"a\": 1} {\"b\": 2}]}", "offset 26: expected ',' or ']'"},
           {"{\"traceEvents\": [1]}", "not an object"},
           {"{\"traceEvents\": []} x", "after the end"},
           {"{\"traceEvents\": [{\"a\": \"unterminated", "the file ends inside"},
           {"{\"traceEvents\": [{\"a\": 1}", "the event array that starts at offset 16"},
           {"{\"k\" 1}", "expected ':'"},
           // Found by json_event_splitter_fuzzer: a member without a value reached the visitor
           // as an empty value.
           {"{\"k\": , \"traceEvents\": []}", "offset 6: expected a value"},
           {"{\"traceEvents\": [], \"k\":}", "offset 24: expected a value"},
           {"", "empty"},
           {"hello", "not a JSON trace"},
       }) {
    const absl::Status status = Split(c.text);
    EXPECT_FALSE(status.ok()) << c.text;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.problem)) << c.text;
  }
}

TEST_F(JsonEventSplitterTest, ByteOrderMarkAndBareArray) {
  ASSERT_TRUE(Split("\xEF\xBB\xBF [ {\"a\": 1} ]").ok());
  EXPECT_THAT(recorder_.events, ::testing::ElementsAre("{\"a\": 1}"));
}

}  // namespace
}  // namespace flopscope::importer
