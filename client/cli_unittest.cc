// Runs the built `flopscope` binary as a user would: exit statuses, signals, the environment the
// command sees, and the errors and output of `jobs` / `report` against a fake daemon.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/testing/fake_query_server.h"
#include "client/testing/json_parse_for_test.h"
#include "client/testing/process_runner.h"
#include "client/testing/sample_report.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;
using testing::kUnset;
using testing::ProcessResult;
using testing::RunProcess;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/cli-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern);
    socket_ = (dir_ / "no-daemon.sock").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // flopscope with the no-op preload standing in for the injector, and no job id inherited
  // from whatever runs the tests.
  ProcessResult Flopscope(std::vector<std::string> args,
                          std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), FLOPSCOPE_CLI_PATH);
    env.emplace("FLOPSCOPE_INJECT_LIB", FLOPSCOPE_TEST_PRELOAD);
    for (const char* name : {"FLOPSCOPE_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
                             "FLOPSCOPE_SOCKET", "LD_PRELOAD"}) {
      env.emplace(name, kUnset);
    }
    return RunProcess(args, env);
  }

  fs::path dir_;
  std::string socket_;
};

TEST_F(CliTest, RunPassesTheExitStatusThrough) {
  const ProcessResult result = Flopscope({"run", "--socket", socket_, "--", "sh", "-c", "exit 7"});
  EXPECT_TRUE(result.exited) << result.err;
  EXPECT_EQ(result.exit_code, 7) << result.err;
  const ProcessResult zero = Flopscope({"run", "--job", "j", "--socket", socket_, "true"});
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
}

TEST_F(CliTest, RunPassesADeathBySignalThrough) {
  const ProcessResult result =
      Flopscope({"run", "--job", "j", "--socket", socket_, "sh", "-c", "kill -TERM $$"});
  EXPECT_TRUE(result.signaled) << result.err;
  EXPECT_EQ(result.signal, SIGTERM);
}

TEST_F(CliTest, RunGivesTheCommandTheInjectorSocketAndJob) {
  const std::string out = (dir_ / "env.txt").string();
  const ProcessResult result = Flopscope(
      {"run", "--job", "demo", "--socket", socket_, "sh", "-c",
       "printf '%s\\n%s\\n%s\\n' \"$LD_PRELOAD\" \"$FLOPSCOPE_JOB_ID\" \"$FLOPSCOPE_SOCKET\" > " +
           out},
      {{"LD_PRELOAD", ""}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream file(out);
  std::string preload, job, socket;
  std::getline(file, preload);
  std::getline(file, job);
  std::getline(file, socket);
  EXPECT_EQ(preload, fs::canonical(FLOPSCOPE_TEST_PRELOAD).string());
  EXPECT_EQ(job, "demo");
  EXPECT_EQ(socket, socket_);
}

TEST_F(CliTest, RunAnnouncesAGeneratedJobIdAndWarnsWithoutADaemon) {
  const ProcessResult result = Flopscope({"run", "--socket", socket_, "true"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  // <command>-<date>-<time>-<pid>: two runs in one second differ by their pid.
  EXPECT_TRUE(
      std::regex_search(result.err, std::regex("flopscope: job true-[0-9]{8}-[0-9]{6}-[0-9]+\n")))
      << result.err;
  EXPECT_TRUE(absl::StrContains(
      result.err, absl::StrCat("flopscope: warning: cannot reach flopscoped at unix:", socket_)))
      << result.err;
  EXPECT_TRUE(absl::StrContains(result.err, "buffered until it starts")) << result.err;
}

TEST_F(CliTest, RunUsageErrorsExitWithTwo) {
  const ProcessResult no_command = Flopscope({"run", "--job", "j"});
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(no_command.err, "no command given")) << no_command.err;

  const ProcessResult bad_job = Flopscope({"run", "--job", "../x", "true"});
  EXPECT_EQ(bad_job.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad_job.err, "--job '../x'")) << bad_job.err;

  const ProcessResult unknown_option = Flopscope({"run", "--jbo", "j", "true"});
  EXPECT_EQ(unknown_option.exit_code, 2) << unknown_option.err;

  const ProcessResult missing_injector =
      Flopscope({"run", "true"}, {{"FLOPSCOPE_INJECT_LIB", (dir_ / "missing.so").string()}});
  EXPECT_EQ(missing_injector.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(missing_injector.err, "injector library not found"))
      << missing_injector.err;
}

TEST_F(CliTest, RunReportsACommandThatCannotStartLikeAShell) {
  const ProcessResult result =
      Flopscope({"run", "--job", "j", "--socket", socket_, "no-such-command-flopscope"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_TRUE(absl::StrContains(result.err, "cannot run 'no-such-command-flopscope'"))
      << result.err;
}

TEST_F(CliTest, QueriesWithoutADaemonExitWithOneAndSayHowToStartIt) {
  const std::string expected =
      absl::StrCat("flopscope: cannot reach flopscoped at unix:", socket_,
                   " (not running? start it with: flopscoped --socket ", socket_, ")\n");
  const ProcessResult jobs = Flopscope({"jobs", "--socket", socket_});
  EXPECT_EQ(jobs.exit_code, 1);
  EXPECT_EQ(jobs.err, expected);
  const ProcessResult report = Flopscope({"report", "demo", "--socket", socket_});
  EXPECT_EQ(report.exit_code, 1);
  EXPECT_EQ(report.err, expected);
}

TEST_F(CliTest, ReportUsageErrorsExitWithTwo) {
  EXPECT_EQ(Flopscope({"report"}).exit_code, 2);
  EXPECT_EQ(Flopscope({"report", "a/b", "--socket", socket_}).exit_code, 2);
  EXPECT_EQ(Flopscope({"report", "demo", "--format", "xml", "--socket", socket_}).exit_code, 2);
  EXPECT_EQ(Flopscope({"report", "demo", "--rank", "-1", "--socket", socket_}).exit_code, 2);
  const auto tree_steps =
      Flopscope({"report", "demo", "--format", "tree", "--steps", "1:2", "--socket", socket_});
  EXPECT_EQ(tree_steps.exit_code, 2);
  EXPECT_NE(tree_steps.err.find("not with the tree view"), std::string::npos) << tree_steps.err;
  EXPECT_EQ(Flopscope({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Flopscope({}).exit_code, 2);
  EXPECT_EQ(Flopscope({"--help"}).exit_code, 0);
}

TEST_F(CliTest, HelpListsTheCommandsOrShowsOnesOptions) {
  const ProcessResult top = Flopscope({"help"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("counters"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("help"), std::string::npos) << top.out;
  const ProcessResult counters = Flopscope({"help", "counters"});
  EXPECT_EQ(counters.exit_code, 0) << counters.err;
  EXPECT_NE(counters.out.find("--list-chips"), std::string::npos) << counters.out;
  const ProcessResult bogus = Flopscope({"help", "bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("unknown command 'bogus'"), std::string::npos) << bogus.err;
  EXPECT_NE(bogus.err.find("commands: run, jobs, report"), std::string::npos) << bogus.err;
}

// Every usage line names the program as people type it, whichever way the help is asked for
// (before: "Usage: counters [OPTIONS]" from `help counters`, the binary's whole path from
// `counters --help`, "Usage: [OPTIONS] SUBCOMMAND" from `help`).
TEST_F(CliTest, HelpUsageLinesNameTheProgram) {
  const ProcessResult help_counters = Flopscope({"help", "counters"});
  EXPECT_EQ(help_counters.exit_code, 0) << help_counters.err;
  EXPECT_NE(help_counters.out.find("\nUsage: flopscope counters [OPTIONS]\n"), std::string::npos)
      << help_counters.out;
  const ProcessResult counters_help = Flopscope({"counters", "--help"});
  EXPECT_EQ(counters_help.exit_code, 0) << counters_help.err;
  EXPECT_EQ(counters_help.out, help_counters.out);
  const ProcessResult report_help = Flopscope({"report", "--help"});
  EXPECT_NE(report_help.out.find("\nUsage: flopscope report [OPTIONS] JOB\n"), std::string::npos)
      << report_help.out;
  EXPECT_EQ(Flopscope({"help", "report"}).out, report_help.out);
  const ProcessResult top = Flopscope({"help"});
  EXPECT_NE(top.out.find("\nUsage: flopscope [OPTIONS] SUBCOMMAND\n"), std::string::npos)
      << top.out;
  EXPECT_EQ(Flopscope({"--help"}).out, top.out);
  const ProcessResult help_help = Flopscope({"help", "--help"});
  EXPECT_NE(help_help.out.find("\nUsage: flopscope help [OPTIONS] [CMD]\n"), std::string::npos)
      << help_help.out;
}

TEST_F(CliTest, AnUnknownCommandIsNamedWithTheNearestOne) {
  const ProcessResult bogus = Flopscope({"bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("unknown command 'bogus'"), std::string::npos) << bogus.err;
  EXPECT_EQ(bogus.err.find("subcommand is required"), std::string::npos) << bogus.err;
  const ProcessResult typo = Flopscope({"reprot", "demo"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("did you mean 'report'?"), std::string::npos) << typo.err;
}

TEST_F(CliTest, CountersTakesAProductNameForItsChip) {
  const ProcessResult h100 = Flopscope({"counters", "--chip", "H100"});
  if (h100.err.find("without CUPTI") != std::string::npos ||
      h100.err.find("libcupti") != std::string::npos) {
    GTEST_SKIP() << "no CUPTI here: " << h100.err;
  }
  EXPECT_EQ(h100.exit_code, 0) << h100.err;
  EXPECT_NE(h100.out.find("chip GH100"), std::string::npos) << h100.out;
}

class CliWithDaemonTest : public CliTest {
 protected:
  CliWithDaemonTest() : server_(Jobs(), testing::CpuOnlyReport()) {}
  static flopscope::v1::ListJobsResponse Jobs() {
    flopscope::v1::ListJobsResponse jobs;
    auto* job = jobs.add_jobs();
    job->set_job_id("demo-job");
    job->set_ranks(2);
    return jobs;
  }
  testing::FakeQueryServer server_;
};

TEST_F(CliWithDaemonTest, ReportPrintsTextAndJson) {
  ASSERT_FALSE(server_.socket().empty());
  const ProcessResult text = Flopscope({"report", "demo-job", "--socket", server_.socket()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  // DeepSpeed's layout first; the job is named in flopscope's additions.
  EXPECT_TRUE(absl::StrContains(text.out, "\n-------------------------- DeepSpeed Flops Profiler"))
      << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "demo-job (")) << text.out;

  const ProcessResult json = Flopscope(
      {"report", "demo-job", "--rank", "1", "--format", "json", "--socket", server_.socket()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(server_.last_requested_ranks(), std::vector<int>{1});
  absl::StatusOr<std::map<std::string, std::string>> flat = testing::FlattenJson(json.out);
  if (absl::IsUnavailable(flat.status())) GTEST_SKIP() << flat.status();
  ASSERT_TRUE(flat.ok()) << flat.status() << json.out;
  EXPECT_EQ(flat->at("job"), "\"demo-job\"");
  EXPECT_EQ(flat->at("modules#"), "4");
}

TEST_F(CliWithDaemonTest, OnlyTheReportDocumentAsksForTheStepTimes) {
  // Each rank's time in each step is most of a long job's report (4 of 4.2 MB for 64 ranks of
  // 3000 steps): only the JSON and HTML document draws them, and not from the per-rank reports.
  for (const char* format : {"text", "tree", "csv"}) {
    const ProcessResult result =
        Flopscope({"report", "demo-job", "--format", format, "--socket", server_.socket()});
    ASSERT_EQ(result.exit_code, 0) << format << ": " << result.err;
  }
  std::vector<std::string> asked = server_.step_times_asked();
  ASSERT_FALSE(asked.empty());
  for (const std::string& request : asked) EXPECT_EQ(request, "report no step times");
  const ProcessResult json =
      Flopscope({"report", "demo-job", "--format", "json", "--socket", server_.socket()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  asked = server_.step_times_asked();
  EXPECT_EQ(asked.back(), "rank-reports no step times");
  EXPECT_EQ(asked[asked.size() - 2], "report step times");
}

TEST_F(CliWithDaemonTest, ReportWritesTheOutputFileOnlyOnSuccess) {
  const std::string output = (dir_ / "report.txt").string();
  const ProcessResult written =
      Flopscope({"report", "demo-job", "--socket", server_.socket(), "--output", output});
  ASSERT_EQ(written.exit_code, 0) << written.err;
  EXPECT_TRUE(written.out.empty());
  auto contents = [&output] {
    std::ifstream file(output);
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  };
  const std::string report = contents();
  EXPECT_TRUE(absl::StrContains(report, "demo-job (")) << report;

  const ProcessResult unknown =
      Flopscope({"report", "nope", "--socket", server_.socket(), "-o", output});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "flopscope: job 'nope' not found\n");
  EXPECT_EQ(contents(), report);  // the earlier report is untouched

  const ProcessResult bad_dir = Flopscope(
      {"report", "demo-job", "--socket", server_.socket(), "-o", (dir_ / "no/dir/r").string()});
  EXPECT_EQ(bad_dir.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(bad_dir.err, "no/dir/r")) << bad_dir.err;
}

TEST_F(CliWithDaemonTest, JobsListsTheDaemonsJobs) {
  const ProcessResult text = Flopscope({"jobs", "--socket", server_.socket()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "demo-job")) << text.out;
  const ProcessResult json = Flopscope({"jobs", "--socket", server_.socket(), "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"job\": \"demo-job\"")) << json.out;
}

TEST_F(CliWithDaemonTest, RunDoesNotWarnWhenTheDaemonAnswers) {
  const ProcessResult result =
      Flopscope({"run", "--job", "j", "--socket", server_.socket(), "true"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_FALSE(absl::StrContains(result.err, "warning")) << result.err;
}

}  // namespace
}  // namespace flopscope::client
