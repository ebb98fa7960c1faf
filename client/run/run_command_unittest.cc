#include "client/run/run_command.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

const absl::Time kNow = absl::FromUnixSeconds(1714564803);  // 2024-05-01 12:00:03 UTC

class PlanRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/plan-run-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern);
    injector_ = (root_ / "libflopscope_inject.so").string();
    std::ofstream(injector_) << "elf";
  }
  void TearDown() override { fs::remove_all(root_); }

  absl::StatusOr<RunPlan> Plan(RunOptions options, std::vector<std::string> env_entries) {
    env_entries.push_back("FLOPSCOPE_INJECT_LIB=" + injector_);
    return PlanRun(options, Environment::FromEntries(env_entries), "", kNow, absl::UTCTimeZone());
  }

  fs::path root_;
  std::string injector_;
};

TEST_F(PlanRunTest, PreloadsTheInjectorAndExportsSocketAndJob) {
  RunOptions options;
  options.job_id = "demo";
  options.socket = "/run/x/flopscope.sock";
  options.command = {"python", "train.py"};
  absl::StatusOr<RunPlan> plan = Plan(options, {"LD_PRELOAD=libjemalloc.so", "HOME=/root"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->argv, options.command);
  EXPECT_EQ(plan->environment.Get("LD_PRELOAD"), injector_ + ":libjemalloc.so");
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_SOCKET"), "/run/x/flopscope.sock");
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_JOB_ID"), "demo");
  EXPECT_EQ(plan->environment.Get("HOME"), "/root");  // everything else passes through
  EXPECT_TRUE(plan->notices.empty());                 // the user named the job, nothing to tell
}

TEST_F(PlanRunTest, RelativeSocketIsMadeAbsoluteForTheJob) {
  RunOptions options;
  options.socket = "some/dir/d.sock";
  options.command = {"true"};
  absl::StatusOr<RunPlan> plan = Plan(options, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_SOCKET"),
            (fs::current_path() / "some/dir/d.sock").string());
}

TEST_F(PlanRunTest, SocketFromTheEnvironmentIsKept) {
  RunOptions options;
  options.command = {"true"};
  absl::StatusOr<RunPlan> plan = Plan(options, {"FLOPSCOPE_SOCKET=/tmp/from-env.sock"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->socket, "/tmp/from-env.sock");
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_SOCKET"), "/tmp/from-env.sock");
}

TEST_F(PlanRunTest, GeneratedJobIdIsExportedAndAnnounced) {
  RunOptions options;
  options.command = {"/usr/bin/python3", "-c", "pass"};
  absl::StatusOr<RunPlan> plan = Plan(options, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->job_id, "python3-20240501-120003");
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_JOB_ID"), "python3-20240501-120003");
  EXPECT_EQ(plan->notices, (std::vector<std::string>{"job python3-20240501-120003"}));
}

TEST_F(PlanRunTest, SchedulerJobIdIsAnnouncedButNotExported) {
  RunOptions options;
  options.command = {"train"};
  absl::StatusOr<RunPlan> plan = Plan(options, {"SLURM_JOB_ID=9876"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->environment.Get("FLOPSCOPE_JOB_ID"), std::nullopt);
  EXPECT_EQ(plan->notices, (std::vector<std::string>{"job 9876 (from SLURM_JOB_ID)"}));
}

TEST_F(PlanRunTest, UserErrorsAreInvalidArgumentOrNotFound) {
  RunOptions no_command;
  EXPECT_EQ(Plan(no_command, {}).status().code(), absl::StatusCode::kInvalidArgument);

  RunOptions bad_job;
  bad_job.job_id = "a b";
  bad_job.command = {"true"};
  EXPECT_EQ(Plan(bad_job, {}).status().code(), absl::StatusCode::kInvalidArgument);

  RunOptions fine;
  fine.command = {"true"};
  absl::StatusOr<RunPlan> missing = PlanRun(
      fine, Environment::FromEntries({"FLOPSCOPE_INJECT_LIB=/nonexistent/libflopscope_inject.so"}),
      "", kNow, absl::UTCTimeZone());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// A build tree as `--torch` expects it: <root>/bin/flopscope, <root>/lib/{injector,shim},
// <root>/python/{flopscope_torch/__init__.py,autostart/sitecustomize.py}.
class TorchPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/plan-torch-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern);
    for (const char* dir : {"bin", "lib", "python/flopscope_torch", "python/autostart"}) {
      fs::create_directories(root_ / dir);
    }
    for (const char* file :
         {"bin/flopscope", "lib/libflopscope_inject.so", "lib/libflopscope_torch_nvtx.so",
          "python/flopscope_torch/__init__.py", "python/autostart/sitecustomize.py"}) {
      std::ofstream(root_ / file) << "x";
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  absl::StatusOr<RunPlan> Plan(std::vector<std::string> env_entries) {
    RunOptions options;
    options.torch = true;
    options.command = {"python", "train.py"};
    return PlanRun(options, Environment::FromEntries(env_entries),
                   (root_ / "bin" / "flopscope").string(), kNow, absl::UTCTimeZone());
  }

  fs::path root_;
};

TEST_F(TorchPlanTest, PutsAutostartAndPackageFirstOnPythonPathAndExportsTheShim) {
  absl::StatusOr<RunPlan> plan = Plan({"PYTHONPATH=/mine:/other"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string python = (root_ / "python").string();
  EXPECT_EQ(plan->environment.Get("PYTHONPATH"),
            absl::StrCat(python, "/autostart:", python, ":/mine:/other"));
  EXPECT_EQ(plan->environment.Get(kTorchShimEnv),
            (root_ / "lib" / "libflopscope_torch_nvtx.so").string());
  EXPECT_EQ(plan->environment.Get("LD_PRELOAD"),
            (root_ / "lib" / "libflopscope_inject.so").string());
}

TEST_F(TorchPlanTest, WithoutTorchNothingPythonIsTouched) {
  RunOptions options;
  options.no_torch = true;
  options.command = {"python", "train.py"};
  absl::StatusOr<RunPlan> plan =
      PlanRun(options, Environment::FromEntries({"PYTHONPATH=/mine"}),
              (root_ / "bin" / "flopscope").string(), kNow, absl::UTCTimeZone());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->environment.Get("PYTHONPATH"), "/mine");
  EXPECT_EQ(plan->environment.Get(kTorchShimEnv), std::nullopt);
}

TEST_F(TorchPlanTest, APythonProgramGetsTorchByItselfAndSaysSo) {
  RunOptions options;
  options.command = {"python3", "train.py"};
  absl::StatusOr<RunPlan> plan =
      PlanRun(options, Environment::FromEntries({"PYTHONPATH=/mine"}),
              (root_ / "bin" / "flopscope").string(), kNow, absl::UTCTimeZone());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->torch);
  EXPECT_EQ(plan->environment.Get(kTorchShimEnv),
            (root_ / "lib" / "libflopscope_torch_nvtx.so").string());
  EXPECT_THAT(plan->notices, ::testing::Contains(::testing::HasSubstr(
                                 "--torch chosen: python3 is a Python program (--no-torch")));
}

TEST_F(TorchPlanTest, NotPythonOrNoSupportMeansNoTorchAndNoError) {
  RunOptions options;
  options.command = {"sh", "-c", "true"};
  const std::string self = (root_ / "bin" / "flopscope").string();
  absl::StatusOr<RunPlan> shell =
      PlanRun(options, Environment::FromEntries({"PATH="}), self, kNow, absl::UTCTimeZone());
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_FALSE(shell->torch);
  EXPECT_EQ(shell->environment.Get(kTorchShimEnv), std::nullopt);

  fs::remove(root_ / "lib" / "libflopscope_torch_nvtx.so");
  options.command = {"python", "train.py"};
  absl::StatusOr<RunPlan> python = PlanRun(options, Environment(), self, kNow, absl::UTCTimeZone());
  ASSERT_TRUE(python.ok()) << python.status();  // only --torch itself needs the support
  EXPECT_FALSE(python->torch);
  EXPECT_THAT(python->notices, ::testing::Not(::testing::Contains(::testing::HasSubstr("torch"))));
}

TEST_F(TorchPlanTest, EnvironmentOverridesTheBuildLayout) {
  const fs::path elsewhere = root_ / "elsewhere";
  fs::create_directories(elsewhere / "flopscope_torch");
  fs::create_directories(elsewhere / "autostart");
  std::ofstream(elsewhere / "flopscope_torch" / "__init__.py") << "x";
  std::ofstream(elsewhere / "autostart" / "sitecustomize.py") << "x";
  std::ofstream(root_ / "shim.so") << "x";
  absl::StatusOr<RunPlan> plan =
      Plan({absl::StrCat(kPythonDirEnv, "=", elsewhere.string()),
            absl::StrCat(kTorchShimEnv, "=", root_.string(), "/shim.so")});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->environment.Get("PYTHONPATH"),
            absl::StrCat(elsewhere.string(), "/autostart:", elsewhere.string()));
  EXPECT_EQ(plan->environment.Get(kTorchShimEnv), (root_ / "shim.so").string());
}

TEST_F(TorchPlanTest, MissingPiecesAreNotFoundAndSaySo) {
  fs::remove(root_ / "lib" / "libflopscope_torch_nvtx.so");
  absl::StatusOr<RunPlan> no_shim = Plan({});
  EXPECT_EQ(no_shim.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_shim.status().message()),
              ::testing::HasSubstr("libflopscope_torch_nvtx.so not found"));

  fs::remove(root_ / "python" / "autostart" / "sitecustomize.py");
  absl::StatusOr<RunPlan> no_autostart = Plan({});
  EXPECT_EQ(no_autostart.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_autostart.status().message()), ::testing::HasSubstr(kPythonDirEnv));
}

TEST(PrependToSearchPathTest, KeepsTheRestInOrderWithoutDuplicatesOrEmptyTail) {
  EXPECT_EQ(PrependToSearchPath({"/a", "/b"}, ""), "/a:/b");
  EXPECT_EQ(PrependToSearchPath({"/a", "/b"}, "/c:/a:/d"), "/a:/b:/c:/d");
  // An empty entry means "the current directory" to Python: it stays.
  EXPECT_EQ(PrependToSearchPath({"/a"}, ":/c"), "/a::/c");
}

}  // namespace
}  // namespace flopscope::client
