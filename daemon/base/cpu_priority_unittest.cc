// The daemon's CPU priority: set for every later thread and for the session it leads, kept (and
// said why) without the privilege, refused once threads are running; background work runs behind
// the queries only where its thread can come back. Each case runs in a forked child, which is
// single-threaded and may change its own priority without touching the test's.

#include "daemon/base/cpu_priority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace flopscope::daemon {
namespace {

using ::testing::HasSubstr;

// Runs `body` in a forked child and returns what it wrote to the pipe (its findings, or why it
// failed). The child exits with _exit: no gtest state is torn down twice.
std::string InChild(const std::function<std::string()>& body) {
  int out[2];
  if (pipe(out) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    const std::string result = body();
    (void)!write(out[1], result.data(), result.size());
    _exit(0);
  }
  close(out[1]);
  std::string result;
  char buffer[512];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) result.append(buffer, n);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return result;
}

int ThreadNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, 0);
}

std::string AutogroupLine() {
  std::ifstream in("/proc/self/autogroup");
  std::string line;
  std::getline(in, line);
  return line;
}

// "threads N session S|- note": the outcome and what the kernel says afterwards.
std::string Raise(int nice) {
  CpuPriorityOutcome outcome;
  if (absl::Status s = RaiseCpuPriority(nice, &outcome); !s.ok()) return s.ToString();
  int later_nice = 0;  // a thread started afterwards has the new priority
  std::thread probe([&later_nice] { later_nice = ThreadNice(); });
  probe.join();
  return absl::StrCat("outcome ", outcome.threads_nice, " session ", outcome.session_set, " later ",
                      later_nice, " autogroup '", AutogroupLine(), "' note '", outcome.note, "'");
}

TEST(CpuPriorityTest, LaterThreadsAndTheSessionItLeadsRunAtTheNiceAskedFor) {
  // Raising the nice value (a lower priority) needs no privilege, so this holds for any user.
  const int target = std::min(ThreadNice() + 3, 19);
  const std::string result = InChild([target] {
    if (setsid() < 0) return std::string("setsid failed");
    return Raise(target);
  });
  EXPECT_THAT(result, HasSubstr(absl::StrCat("outcome ", target, " session 1 later ", target)));
  EXPECT_THAT(result, HasSubstr(absl::StrCat(" nice ", target, "'")));
  EXPECT_THAT(result, HasSubstr("note ''"));
}

TEST(CpuPriorityTest, TheSessionOfAnotherProcessIsLeftAlone) {
  // The child does not lead its session (the test's): a daemon started from a shell must not
  // change the shell's whole session.
  const std::string before = AutogroupLine();
  const int target = std::min(ThreadNice() + 2, 19);
  const std::string result = InChild([target] { return Raise(target); });
  EXPECT_THAT(result, HasSubstr(absl::StrCat("outcome ", target, " session 0 later ", target)));
  EXPECT_EQ(AutogroupLine(), before);
}

TEST(CpuPriorityTest, WithoutThePrivilegeThePriorityIsKeptAndTheNoteSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another uid";
  const int now = ThreadNice();
  const std::string result = InChild([] {
    if (setsid() < 0 || setgid(65534) != 0 || setuid(65534) != 0) return std::string("drop");
    return Raise(-20);
  });
  EXPECT_THAT(result, HasSubstr(absl::StrCat("outcome ", now, " session 0")));
  EXPECT_THAT(result, HasSubstr("needs CAP_SYS_NICE"));
}

TEST(CpuPriorityTest, AsRootAHigherPriorityIsSet) {
  if (geteuid() != 0) GTEST_SKIP() << "needs CAP_SYS_NICE";
  const std::string result = InChild([] {
    if (setsid() < 0) return std::string("setsid failed");
    return Raise(-7);
  });
  EXPECT_THAT(result, HasSubstr("outcome -7 session 1 later -7 autogroup '"));
  EXPECT_THAT(result, HasSubstr(" nice -7' note ''"));
}

TEST(CpuPriorityTest, RefusedOutsideTheRangeAndOnceThreadsRun) {
  CpuPriorityOutcome outcome;
  EXPECT_TRUE(absl::IsInvalidArgument(RaiseCpuPriority(-21, &outcome)));
  EXPECT_TRUE(absl::IsInvalidArgument(RaiseCpuPriority(20, &outcome)));
  absl::Notification done;
  std::thread running([&done] { done.WaitForNotification(); });
  absl::Status s = RaiseCpuPriority(ThreadNice(), &outcome);
  done.Notify();
  running.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("before any thread starts"));
}

// The thread's own nice value (PRIO_PROCESS with a thread id names that thread alone).
int NiceOfThread(pid_t thread) {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(thread));
}

TEST(ScopedThreadNiceTest, AStreamRunsBehindTheQueriesAndItsThreadComesBack) {
  if (!MayLowerNiceTo(-20)) GTEST_SKIP() << "needs CAP_SYS_NICE to come back";
  const std::string result = InChild([] {
    if (setpriority(PRIO_PROCESS, 0, -10) != 0) return std::string("setpriority failed");
    const pid_t self = gettid();
    int other = 0;  // another thread of the process keeps its priority
    std::string inside;
    {
      ScopedThreadNice behind(kBackgroundNice);
      std::thread query([&other] { other = NiceOfThread(gettid()); });
      query.join();
      inside = absl::StrCat("applied ", behind.applied(), " inside ", NiceOfThread(self), " other ",
                            other);
    }
    return absl::StrCat(inside, " after ", NiceOfThread(self));
  });
  // A thread started inside the scope inherits the caller's nice value of that moment (the
  // kernel copies it at clone); the daemon's query threads were all started before.
  EXPECT_EQ(result, absl::StrCat("applied 1 inside ", kBackgroundNice, " other ", kBackgroundNice,
                                 " after -10"));
}

TEST(ScopedThreadNiceTest, OtherThreadsKeepTheirPriority) {
  if (!MayLowerNiceTo(-20)) GTEST_SKIP() << "needs CAP_SYS_NICE to come back";
  const std::string result = InChild([] {
    if (setpriority(PRIO_PROCESS, 0, -10) != 0) return std::string("setpriority failed");
    absl::Notification inside, checked;
    std::thread stream([&] {
      ScopedThreadNice behind(kBackgroundNice);
      inside.Notify();
      checked.WaitForNotification();
    });
    inside.WaitForNotification();
    const std::string out = absl::StrCat("query ", NiceOfThread(gettid()));
    checked.Notify();
    stream.join();
    return out;
  });
  EXPECT_EQ(result, "query -10");
}

TEST(ScopedThreadNiceTest, WithoutAWayBackNothingChanges) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another uid";
  const std::string result = InChild([] {
    // An unprivileged daemon at nice 0 whose RLIMIT_NICE allows no lower value: raising a
    // stream's thread to 5 could never be undone, so it is not done.
    const rlimit none{0, 0};
    if (setrlimit(RLIMIT_NICE, &none) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      return std::string("drop");
    }
    ScopedThreadNice behind(5);
    return absl::StrCat("may ", MayLowerNiceTo(0), " applied ", behind.applied(), " nice ",
                        NiceOfThread(gettid()));
  });
  EXPECT_EQ(result, "may 0 applied 0 nice 0");
}

TEST(ScopedThreadNiceTest, NeverRaisesAPriority) {
  const std::string result = InChild([] {
    if (setpriority(PRIO_PROCESS, 0, 7) != 0) return std::string("setpriority failed");
    ScopedThreadNice behind(kBackgroundNice);  // 0 would be a higher priority than 7
    return absl::StrCat("applied ", behind.applied(), " nice ", NiceOfThread(gettid()));
  });
  EXPECT_EQ(result, "applied 0 nice 7");
}

}  // namespace
}  // namespace flopscope::daemon
