// The data directory lock: one holder at a time, the holder named, released by any death.

#include "daemon/server/data_dir_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/server/daemon_server.h"
#include "daemon/testing/test_temp_dir.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

TEST(DataDirLockTest, ASecondHolderIsRefusedWithTheFirstOnesPid) {
  fixtures::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<DataDirLock>> first = DataDirLock::Acquire(dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<DataDirLock>> second = DataDirLock::Acquire(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status()));
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("(pid ", getpid(), ")")));
  EXPECT_THAT(second.status().message(), HasSubstr(dir.path()));

  first->reset();  // released: the next one gets it
  EXPECT_TRUE(DataDirLock::Acquire(dir.path()).ok());
}

TEST(DataDirLockTest, AHolderKilledWithSigkillReleasesAtOnceEvenUnreaped) {
  fixtures::ScopedTempDir dir;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<DataDirLock>> held = DataDirLock::Acquire(dir.path());
    const char byte = held.ok() ? 'y' : 'n';
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 'y');
  EXPECT_FALSE(DataDirLock::Acquire(dir.path(), absl::Milliseconds(100)).ok());

  ASSERT_EQ(kill(child, SIGKILL), 0);  // not waited for: the child may still be a zombie
  absl::StatusOr<std::unique_ptr<DataDirLock>> after = DataDirLock::Acquire(dir.path());
  EXPECT_TRUE(after.ok()) << after.status();
  int status = 0;
  waitpid(child, &status, 0);
}

TEST(DataDirLockTest, TwoDaemonsNeverShareADataDirectory) {
  fixtures::ScopedTempDir dir;
  DaemonOptions options;
  options.data_dir = dir.File("data");
  options.socket_path = dir.File("a.sock");
  absl::StatusOr<std::unique_ptr<DaemonServer>> first = DaemonServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();

  DaemonOptions rival = options;
  rival.socket_path = dir.File("b.sock");
  absl::StatusOr<std::unique_ptr<DaemonServer>> second = DaemonServer::Start(rival);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("another flopscoped (pid ", getpid(),
                                     ") is using the data directory ", options.data_dir)));
  EXPECT_FALSE(std::filesystem::exists(rival.socket_path));

  (*first)->Shutdown();  // the lock goes with the daemon
  EXPECT_TRUE(DaemonServer::Start(rival).ok());
}

}  // namespace
}  // namespace flopscope::daemon
