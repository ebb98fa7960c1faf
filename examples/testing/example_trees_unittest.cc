// Runs the example programs under the recording NVTX tool (testing/nvtx_recorder.cc) and checks
// the trees and call counts their main.cc documents, for a few --steps / --layers.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace {

struct Recording {
  int exit_status = -1;
  std::string stdout_text;
  std::map<std::string, int> counts;  // "kind\tdomain\ttext" -> count
  std::vector<std::string> main_pushes;
  std::vector<std::string> range_order;  // "domain\tpath" of ranges, first-seen order
};

Recording Record(const std::string& program, const std::string& arguments) {
  Recording recording;
  const std::string out = absl::StrCat(::testing::TempDir(), "/nvtx-recording-", getpid());
  const std::string command =
      absl::StrCat("NVTX_INJECTION64_PATH='", FLOPSCOPE_NVTX_RECORDER, "' NVTX_RECORDER_OUT='", out,
                   "' '", program, "' ", arguments);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return recording;
  char buffer[1024];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) {
    recording.stdout_text.append(buffer, n);
  }
  const int status = pclose(pipe);
  recording.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream file(out);
  for (std::string line; std::getline(file, line);) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields[0] == "main_push") {
      recording.main_pushes.push_back(fields[1]);
    } else if (fields.size() == 4) {
      recording.counts[absl::StrCat(fields[0], "\t", fields[1], "\t", fields[2])] =
          std::stoi(fields[3]);
      if (fields[0] == "range") recording.range_order.push_back(fields[1] + "\t" + fields[2]);
    }
  }
  unlink(out.c_str());
  return recording;
}

// Count of a default-domain range path ("" domain) or of one in `domain`.
int Range(const Recording& r, const std::string& path, const std::string& domain = "") {
  auto it = r.counts.find(absl::StrCat("range\t", domain, "\t", path));
  return it == r.counts.end() ? 0 : it->second;
}

int RangePaths(const Recording& r, const std::string& domain) {
  int paths = 0;
  for (const auto& [key, count] : r.counts) {
    if (key.rfind(absl::StrCat("range\t", domain, "\t"), 0) == 0) ++paths;
  }
  return paths;
}

class TransformerTreeTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(TransformerTreeTest, ModulePathsAndCallCountsFollowStepsAndLayers) {
  const auto [steps, layers] = GetParam();
  const Recording r =
      Record(FLOPSCOPE_TRANSFORMER_NVTX, absl::StrCat("--steps ", steps, " --layers ", layers,
                                                      " --hidden 32 --batch 2 --seq 8 --vocab 64"));
  ASSERT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.stdout_text,
            absl::StrCat("transformer_nvtx: ", steps, " steps, ", layers, " layers, cpu\n"));

  for (const std::string module :
       {"TransformerLM", "TransformerLM/embedding", "TransformerLM/head"}) {
    EXPECT_EQ(Range(r, module), 2 * steps) << module;
  }
  for (int i = 0; i < layers; ++i) {
    const std::string layer = absl::StrCat("TransformerLM/layers.", i);
    EXPECT_EQ(Range(r, layer), 2 * steps) << layer;
    EXPECT_EQ(Range(r, layer + "/self_attn"), 2 * steps) << layer;
    EXPECT_EQ(Range(r, layer + "/mlp"), 2 * steps) << layer;
  }
  EXPECT_EQ(Range(r, "AdamW"), steps);
  EXPECT_EQ(Range(r, "DataLoader"), steps);
  EXPECT_EQ(Range(r, "DataLoader/next_batch"), steps);
  EXPECT_EQ(RangePaths(r, ""), (3 + 3 * layers) + 3);  // nothing else in the default domain

  for (const char* phase : {"step", "step/forward", "step/backward", "step/optimizer"}) {
    EXPECT_EQ(Range(r, phase, "flopscope"), steps) << phase;
  }
  EXPECT_EQ(RangePaths(r, "flopscope"), 4);
  EXPECT_EQ(r.counts.count("unmatched_pop\t\t"), 0u);
}

INSTANTIATE_TEST_SUITE_P(StepsAndLayers, TransformerTreeTest,
                         ::testing::Values(std::pair{1, 1}, std::pair{3, 2}, std::pair{2, 4}));

TEST(TransformerTreeTest, PushOrderIsForwardThenReversedBackwardThenOptimizer) {
  const Recording r = Record(FLOPSCOPE_TRANSFORMER_NVTX,
                             "--steps 1 --layers 2 --hidden 16 --batch 1 --seq 4 --vocab 32 "
                             "--no-loader-thread");
  ASSERT_EQ(r.exit_status, 0);
  const std::string m = "TransformerLM";
  EXPECT_EQ(
      r.main_pushes,
      (std::vector<std::string>{
          // forward
          m, m + "/embedding", m + "/layers.0", m + "/layers.0/self_attn", m + "/layers.0/mlp",
          m + "/layers.1", m + "/layers.1/self_attn", m + "/layers.1/mlp", m + "/head",
          // backward
          m, m + "/head", m + "/layers.1", m + "/layers.1/mlp", m + "/layers.1/self_attn",
          m + "/layers.0", m + "/layers.0/mlp", m + "/layers.0/self_attn", m + "/embedding",
          // optimizer
          "AdamW"}));
  EXPECT_EQ(Range(r, "DataLoader"), 0);  // no loader thread, no loader ranges
}

TEST(TransformerTreeTest, AnnouncesBatchSizeAndParamsOnce) {
  const Recording r = Record(FLOPSCOPE_TRANSFORMER_NVTX,
                             "--steps 2 --layers 1 --hidden 2 --batch 5 --seq 3 --vocab 3");
  ASSERT_EQ(r.exit_status, 0);
  // H = 2, V = 3: the numbers worked by hand in parameter_counts_unittest.cc.
  const std::map<std::string, int> expected_marks = {
      {"batch_size=5", 1},
      {"params TransformerLM=78", 1},
      {"params TransformerLM/embedding=6", 1},
      {"params TransformerLM/layers.0=66", 1},
      {"params TransformerLM/layers.0/self_attn=24", 1},
      {"params TransformerLM/layers.0/mlp=42", 1},
      {"params TransformerLM/head=6", 1}};
  // The tree, class, extra_repr and estimate marks are checked in transformer_model_unittest.cc;
  // here: the batch size and the params, and that every mark is announced exactly once.
  std::map<std::string, int> marks;
  for (const auto& [key, count] : r.counts) {
    if (key.rfind("mark\tflopscope\t", 0) != 0) continue;
    const std::string mark = key.substr(15);
    EXPECT_EQ(count, 1) << mark;
    if (mark.rfind("batch_size=", 0) == 0 || mark.rfind("params ", 0) == 0) marks[mark] = count;
  }
  EXPECT_EQ(marks, expected_marks);
}

TEST(NvtxMinimalTreeTest, FixedTreeRepeated) {
  for (int repeat : {1, 4}) {
    const Recording r = Record(FLOPSCOPE_NVTX_MINIMAL, absl::StrCat("--repeat ", repeat));
    ASSERT_EQ(r.exit_status, 0);
    EXPECT_EQ(r.stdout_text, absl::StrCat("nvtx_minimal: ", repeat, " repetitions\n"));
    EXPECT_EQ(Range(r, "outer"), repeat);
    EXPECT_EQ(Range(r, "outer/inner"), 3 * repeat);
    EXPECT_EQ(Range(r, "registered"), repeat);
    EXPECT_EQ(RangePaths(r, ""), 3);
    EXPECT_EQ(r.counts.at("startend\t\tstartend"), repeat);
    EXPECT_EQ(r.counts.at("mark\t\tnvtx_minimal"), repeat);
    EXPECT_EQ(r.counts.at("mark\tflopscope\tparams outer=42"), 1);
  }
}

TEST(NvtxMinimalTreeTest, RejectsBadArguments) {
  EXPECT_EQ(Record(FLOPSCOPE_NVTX_MINIMAL, "--repeat 0 2>/dev/null").exit_status, 2);
  EXPECT_EQ(Record(FLOPSCOPE_NVTX_MINIMAL, "--bogus 2>/dev/null").exit_status, 2);
}

}  // namespace
