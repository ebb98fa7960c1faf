#include "client/run/private_daemon.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

TEST(KeptRunsDirTest, XdgDataHomeThenHome) {
  EXPECT_EQ(KeptRunsDir(Environment::FromEntries({"XDG_DATA_HOME=/d", "HOME=/h"})),
            "/d/flopscope/runs");
  EXPECT_EQ(KeptRunsDir(Environment::FromEntries({"XDG_DATA_HOME=", "HOME=/h"})),
            "/h/.local/share/flopscope/runs");
  EXPECT_EQ(KeptRunsDir(Environment()), "");
}

TEST(RunDirNameTest, RepeatedRunsShareTheirJobsDirectory) {
  EXPECT_EQ(RunDirName("bert-1"), "bert-1");
  EXPECT_EQ(RunDirName("bert-1.run2"), "bert-1");
  EXPECT_EQ(RunDirName("bert-1.run17"), "bert-1");
  EXPECT_EQ(RunDirName("bert-1.run1"), "bert-1.run1");  // runs are numbered from 2
  EXPECT_EQ(RunDirName("bert-1.running"), "bert-1.running");
  EXPECT_EQ(RunDirName(".run2"), ".run2");
}

class KeptRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/kept-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    env_ = Environment::FromEntries({"XDG_DATA_HOME=" + root_.string(), "PATH="});
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  Environment env_;
};

TEST_F(KeptRunTest, FindsAJobsDirectoryAndItsRepeatedRuns) {
  fs::create_directories(root_ / "flopscope/runs/bert-1");
  const std::string dir = (root_ / "flopscope/runs/bert-1").string();
  EXPECT_EQ(FindKeptRun(env_, "bert-1"), dir);
  EXPECT_EQ(FindKeptRun(env_, "bert-1.run3"), dir);
  EXPECT_EQ(FindKeptRun(env_, "gpt-2"), "");
  EXPECT_EQ(FindKeptRun(env_, "../runs"), "");
  EXPECT_EQ(FindKeptRun(env_, ""), "");
}

TEST_F(KeptRunTest, DaemonBinaryBesideTheClientThenOnPath) {
  fs::create_directories(root_ / "bin");
  fs::create_directories(root_ / "path");
  std::ofstream(root_ / "path" / "flopscoped") << "#!/bin/true\n";
  chmod((root_ / "path" / "flopscoped").c_str(), 0755);
  const std::string self = (root_ / "bin" / "flopscope").string();
  const Environment env = Environment::FromEntries({"PATH=" + (root_ / "path").string()});
  EXPECT_EQ(LocateDaemonBinary(env, self).value_or(""), (root_ / "path/flopscoped").string());
  std::ofstream(root_ / "bin" / "flopscoped") << "#!/bin/true\n";
  chmod((root_ / "bin" / "flopscoped").c_str(), 0755);
  EXPECT_EQ(LocateDaemonBinary(env, self).value_or(""), (root_ / "bin/flopscoped").string());
  const absl::StatusOr<std::string> none = LocateDaemonBinary(env_, "");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KeptRunTest, ADaemonThatCannotStartSaysWhyFromItsLog) {
  const fs::path fake = root_ / "fake-flopscoped";
  std::ofstream(fake) << "#!/bin/sh\necho 'data directory is locked' >&2\nexit 1\n";
  chmod(fake.c_str(), 0755);
  PrivateDaemon::Config config;
  config.binary = fake.string();
  config.data_dir = (root_ / "data").string();
  config.log_path = (root_ / "data" / "flopscoped.log").string();
  config.start_timeout = absl::Seconds(10);
  const absl::StatusOr<std::unique_ptr<PrivateDaemon>> daemon =
      PrivateDaemon::Start(config, Environment::FromEntries({"TMPDIR=" + root_.string()}));
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.status().message().find("data directory is locked"), std::string::npos)
      << daemon.status();
  struct stat info;
  ASSERT_EQ(stat(config.data_dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  // Its socket directory is gone again: only the data directory is left in root_.
  int entries = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(root_)) {
    entries += entry.path().filename().string().rfind("flopscope-", 0) == 0;
  }
  EXPECT_EQ(entries, 0);
}

}  // namespace
}  // namespace flopscope::client
