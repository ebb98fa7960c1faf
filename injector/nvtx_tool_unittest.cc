// Drives the real libflopscope_inject.so through the real NVTX v3 headers: each test runs
// flopscope_nvtx_testapp (which includes nvtx3 and links a second NVTX-including DSO) under
// LD_PRELOAD, then reads what the injector produced from its debug dump or from a fake
// Collector.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "injector/export/testing/dump_reader.h"
#include "injector/transport/testing/fake_collector.h"

extern char** environ;

namespace flopscope::injector {
namespace {

using testing::Dump;
using testing::ReadDump;
using transport::testing::FakeCollector;
using transport::testing::TempDir;

constexpr uint32_t kUnmatchedPop = 4;
constexpr uint32_t kUnclosedRange = 7;
constexpr uint32_t kBufferFull = 1;
constexpr uint32_t kStartEnd = 2;

struct AppRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the test app with a clean flopscope/NVTX environment plus `env`.
AppRun RunApp(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const TempDir& dir, bool preload = true) {
  std::vector<std::string> environment;
  for (char** var = environ; *var != nullptr; ++var) {
    const std::string entry = *var;
    if (entry.rfind("FLOPSCOPE_", 0) == 0 || entry.rfind("NVTX_INJECTION", 0) == 0 ||
        entry.rfind("CUDA_INJECTION", 0) == 0 || entry.rfind("LD_PRELOAD=", 0) == 0 ||
        entry.rfind("RANK=", 0) == 0 || entry.rfind("WORLD_SIZE=", 0) == 0) {
      continue;
    }
    environment.push_back(entry);
  }
  if (preload) environment.push_back(std::string("LD_PRELOAD=") + FLOPSCOPE_TEST_INJECTOR_PATH);
  // Never the user's own spool: a test's orphan would be delivered to a real daemon later.
  if (env.count("FLOPSCOPE_SPOOL_DIR") == 0) {
    environment.push_back("FLOPSCOPE_SPOOL_DIR=" + dir.path() + "/spool");
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = {FLOPSCOPE_TEST_APP_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const std::string out_path = dir.path() + "/stdout";
  const std::string err_path = dir.path() + "/stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  AppRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class NvtxToolTest : public ::testing::Test {
 protected:
  // Runs a scenario with the debug dump and returns the parsed dump.
  Dump RunWithDump(const std::vector<std::string>& args,
                   std::map<std::string, std::string> env = {}, bool preload = true) {
    env["FLOPSCOPE_DEBUG_DUMP"] = dump_path();
    run_ = RunApp(args, env, dir_, preload);
    Dump dump = ReadDump(dump_path());
    EXPECT_TRUE(dump.problems.empty()) << dump.problems.front();
    return dump;
  }
  std::string dump_path() const { return dir_.path() + "/dump.tsv"; }

  TempDir dir_;
  AppRun run_;
};

TEST_F(NvtxToolTest, NestedRangesInEveryMessageFlavour) {
  const Dump dump =
      RunWithDump({"nested"}, {{"FLOPSCOPE_JOB_ID", "job-7"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_EQ(run_.out, "job output unchanged\n");
  ASSERT_GE(dump.hello.size(), 14u);
  EXPECT_EQ(dump.hello[1], "job-7");
  EXPECT_EQ(dump.hello[2], "3");
  EXPECT_EQ(dump.hello[4], "4");
  EXPECT_TRUE(dump.hello[12] == "no CUDA driver: NVTX ranges only" ||
              dump.hello[12] == "kernel tracing not enabled in this build")
      << dump.hello[12];
  EXPECT_TRUE(Contains(dump.hello[13], "flopscope_nvtx_testapp nested"));
  EXPECT_EQ(dump.RangesAt("Model").size(), 1u);
  EXPECT_EQ(dump.RangesAt("Model/layer.0").size(), 1u);
  EXPECT_EQ(dump.RangesAt("Model/layer.0/attn").size(), 1u);
  EXPECT_EQ(dump.RangesAt("Model/layer.0/m\xC3\xA9lange").size(), 1u);
  EXPECT_EQ(dump.RangesAt("Model/layer.0/mlp").size(), 1u);
  EXPECT_EQ(dump.ranges.size(), 5u);
  const auto model = dump.RangesAt("Model")[0];
  const auto layer = dump.RangesAt("Model/layer.0")[0];
  EXPECT_EQ(layer.parent_instance_id, model.instance_id);
  EXPECT_LE(model.start_ns, layer.start_ns);
  EXPECT_GE(model.end_ns, layer.end_ns);
  EXPECT_EQ(dump.Loss(kUnmatchedPop), 1u);
  EXPECT_EQ(dump.final_batches, 1);
  EXPECT_TRUE(dump.final_is_last);
}

TEST_F(NvtxToolTest, TwoNvtxInstancesShareOneSession) {
  const Dump dump = RunWithDump({"domains"});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_TRUE(Contains(run_.out, "nvtx_inits=2")) << run_.out;
  ASSERT_EQ(dump.RangesAt("step").size(), 1u);
  ASSERT_EQ(dump.RangesAt("step/forward").size(), 1u);
  EXPECT_EQ(dump.paths.at(dump.RangesAt("step")[0].path_id).domain, "flopscope");
  EXPECT_EQ(dump.RangesAt("step/forward")[0].parent_instance_id,
            dump.RangesAt("step")[0].instance_id);
  // Module paths never hang under steps or phases.
  ASSERT_EQ(dump.RangesAt("Model").size(), 1u);
  EXPECT_EQ(dump.RangesAt("Model")[0].parent_instance_id, 0u);
  EXPECT_EQ(dump.RangesAt("Model/Block").size(), 1u);
  ASSERT_EQ(dump.RangesAt("Model/io").size(), 1u);
  EXPECT_EQ(dump.paths.at(dump.RangesAt("Model/io")[0].path_id).domain, "other");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"params Model/Block", "1234"}, {"parallel", "tp=2 pp=1 dp=4"}};
  EXPECT_EQ(dump.metadata, expected);
  EXPECT_EQ(dump.losses.size(), 0u);
}

TEST_F(NvtxToolTest, StartEndRangesCrossThreads) {
  const Dump dump = RunWithDump({"startend"});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  const std::string main_tid = run_.out.substr(run_.out.rfind(' ') + 1);
  ASSERT_EQ(dump.RangesAt("Model/load").size(), 1u);
  const auto load = dump.RangesAt("Model/load")[0];
  EXPECT_EQ(load.kind, kStartEnd);
  EXPECT_EQ(std::to_string(load.thread_id) + "\n", main_tid);
  EXPECT_EQ(load.parent_instance_id, dump.RangesAt("Model")[0].instance_id);
  ASSERT_EQ(dump.RangesAt("Model/prefetch").size(), 1u);
  EXPECT_EQ(dump.paths.at(dump.RangesAt("Model/prefetch")[0].path_id).domain, "io");
  EXPECT_EQ(dump.Loss(kUnmatchedPop), 1u);  // the second end of `load`
}

TEST_F(NvtxToolTest, ThreadsKeepTheirOwnStacks) {
  const Dump dump = RunWithDump({"threads"});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_EQ(dump.ranges.size(), 4004u);
  for (int t = 0; t < 4; ++t) {
    const std::string worker = "worker" + std::to_string(t);
    ASSERT_EQ(dump.RangesAt(worker).size(), 1u) << worker;
    const auto ops = dump.RangesAt(worker + "/op");
    ASSERT_EQ(ops.size(), 1000u) << worker;
    for (const auto& op : ops) {
      EXPECT_EQ(op.thread_id, dump.RangesAt(worker)[0].thread_id);
      EXPECT_EQ(op.parent_instance_id, dump.RangesAt(worker)[0].instance_id);
    }
  }
}

TEST_F(NvtxToolTest, ForkedChildRunsWithoutTheInjector) {
  const Dump dump = RunWithDump({"fork"});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_TRUE(Contains(run_.out, "child exit 0"));
  EXPECT_EQ(dump.RangesAt("parent_before").size(), 1u);
  EXPECT_EQ(dump.RangesAt("parent_after").size(), 1u);
  EXPECT_EQ(dump.RangesAt("child_range").size(), 0u);
  EXPECT_EQ(dump.final_batches, 1);  // the child flushed nothing over the parent's dump
}

TEST_F(NvtxToolTest, ExitFromAnotherThreadKeepsTheExitCodeAndFlushes) {
  const Dump dump = RunWithDump({"exit_thread"});
  EXPECT_EQ(run_.exit_code, 3) << run_.err;
  EXPECT_EQ(dump.RangesAt("exiting_thread").size(), 1u);
  EXPECT_TRUE(dump.final_is_last);
  EXPECT_EQ(dump.Loss(kUnclosedRange), 1u);  // main_busy
}

TEST_F(NvtxToolTest, RangesOpenAtExitAreCounted) {
  const Dump dump = RunWithDump({"unclosed"});
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(dump.RangesAt("never_closed/closed").size(), 1u);
  EXPECT_EQ(dump.Loss(kUnclosedRange), 1u);
}

TEST_F(NvtxToolTest, AProcessWithoutNvtxStartsNoSession) {
  run_ = RunApp({"none"}, {{"FLOPSCOPE_DEBUG_DUMP", dump_path()}}, dir_);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(run_.out, "no nvtx\n");
  EXPECT_EQ(run_.err, "");
  EXPECT_NE(access(dump_path().c_str(), F_OK), 0) << "a session wrote a dump";
}

TEST_F(NvtxToolTest, InjectionPathAloneWorksWithoutPreload) {
  const Dump dump =
      RunWithDump({"nested"}, {{"NVTX_INJECTION64_PATH", FLOPSCOPE_TEST_INJECTOR_PATH}},
                  /*preload=*/false);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(dump.ranges.size(), 5u);
}

TEST_F(NvtxToolTest, BoundedBufferLosesNothingSilently) {
  constexpr int kPairs = 200000;
  const Dump dump = RunWithDump({"many", std::to_string(kPairs)},
                                {{"FLOPSCOPE_BUFFER_MB", "1"}, {"FLOPSCOPE_FLUSH_MS", "60000"}});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_EQ(dump.ranges.size() + dump.Loss(kBufferFull), static_cast<uint64_t>(kPairs));
}

TEST_F(NvtxToolTest, StreamsToACollector) {
  FakeCollector collector(dir_.path() + "/fs.sock");
  run_ =
      RunApp({"nested"},
             {{"FLOPSCOPE_SOCKET", dir_.path() + "/fs.sock"}, {"FLOPSCOPE_JOB_ID", "e2e"}}, dir_);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(run_.out, "job output unchanged\n");
  EXPECT_FALSE(Contains(run_.err, "not delivered")) << run_.err;
  ASSERT_EQ(collector.hellos().size(), 1u);
  EXPECT_EQ(collector.hellos()[0].job_id(), "e2e");
  EXPECT_EQ(collector.hellos()[0].protocol_version(), 1u);
  const auto batches = collector.committed();
  ASSERT_FALSE(batches.empty());
  EXPECT_TRUE(batches.back().final());
  int ranges = 0, paths = 0;
  for (const auto& batch : batches) {
    ranges += batch.ranges_size();
    paths += batch.paths_size();
  }
  EXPECT_EQ(ranges, 5);
  EXPECT_EQ(paths, 5);
}

TEST_F(NvtxToolTest, UnreachableDaemonIsReportedInOneLine) {
  run_ = RunApp({"nested"},
                {{"FLOPSCOPE_SOCKET", dir_.path() + "/nobody.sock"}, {"FLOPSCOPE_SPOOL_MB", "0"}},
                dir_);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(run_.out, "job output unchanged\n");
  const std::string line = "flopscope: 5 records not delivered to unix:" + dir_.path() +
                           "/nobody.sock: 5 unacknowledged: the daemon was not reachable";
  EXPECT_TRUE(Contains(run_.err, line)) << run_.err;
  // The spool's part names its real cause (issue 34: it said "full or off" whatever it was).
  EXPECT_TRUE(Contains(run_.err, "and there was no spool: FLOPSCOPE_SPOOL_MB=0")) << run_.err;
}

TEST_F(NvtxToolTest, UnreachableDaemonSpoolsEverythingForLater) {
  run_ = RunApp({"nested"}, {{"FLOPSCOPE_SOCKET", dir_.path() + "/nobody.sock"}}, dir_);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(run_.out, "job output unchanged\n");
  EXPECT_FALSE(Contains(run_.err, "not delivered")) << run_.err;
  EXPECT_TRUE(Contains(run_.err, "flopscope: 5 records spooled to " + dir_.path() + "/spool/"))
      << run_.err;
}

#ifdef FLOPSCOPE_TEST_HAVE_CUPTI
// Counter windows read FLOPSCOPE_COUNTERS when kernel tracing is built; a malformed value is one
// warning and nothing else (and the warnings of kernel tracing's settings reach stderr at all).
TEST_F(NvtxToolTest, MalformedCounterSettingsWarnOnceAndTheJobRuns) {
  const Dump dump = RunWithDump({"nested"}, {{"FLOPSCOPE_COUNTERS", "steps=4:3"}});
  EXPECT_EQ(run_.exit_code, 0) << run_.err;
  EXPECT_EQ(run_.out, "job output unchanged\n");
  const std::string warning = "flopscope: ignoring FLOPSCOPE_COUNTERS='steps=4:3'";
  EXPECT_TRUE(Contains(run_.err, warning)) << run_.err;
  EXPECT_EQ(run_.err.find(warning), run_.err.rfind(warning)) << run_.err;
  EXPECT_FALSE(dump.ranges.empty());
}
#endif

TEST_F(NvtxToolTest, MissingTransportLibraryNeverBreaksTheJob) {
  run_ = RunApp({"nested"}, {{"FLOPSCOPE_TRANSPORT_PATH", "/nonexistent/libt.so"}}, dir_);
  EXPECT_EQ(run_.exit_code, 0);
  EXPECT_EQ(run_.out, "job output unchanged\n");
  EXPECT_TRUE(Contains(run_.err, "flopscope: cannot load the transport library /nonexistent"))
      << run_.err;
  EXPECT_TRUE(Contains(run_.err, "5 records not delivered")) << run_.err;
}

}  // namespace
}  // namespace flopscope::injector
