// Tests of the SIGTERM path (sigterm_drain.h), each in a forked child (the install is once per
// process and changes its disposition): the drain runs and the process still dies of SIGTERM,
// or of SIGINT (Ctrl-C), named; a drain that hangs is cut off at the bound; a second SIGTERM
// ends the drain at once; an application's handler or SIG_IGN is left alone, each signal on its
// own; a forked child dies as SIG_DFL would, never draining its parent.

#include "injector/sigterm_drain.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>

#include "gtest/gtest.h"

namespace flopscope::injector {
namespace {

using Clock = std::chrono::steady_clock;

int g_report_fd = -1;  // the child's end of the pipe the drains write to

void Report(char what) { (void)!write(g_report_fd, &what, 1); }
void DrainQuickly() { Report('d'); }
void DrainForever() {
  Report('s');
  while (true) pause();
}

struct ChildResult {
  int status = 0;
  std::string reported;  // what the child's drains and checks wrote, in order
  double seconds = 0;    // from fork to its end
};

// Runs `body` in a forked child, which then waits to be ended; `after_start` runs in the parent
// with the child's pid once the child wrote its first byte.
ChildResult RunChild(const std::function<void()>& body,
                     const std::function<void(pid_t)>& after_start) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const auto started = Clock::now();
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    g_report_fd = fds[1];
    body();
    for (int i = 0; i < 3000; ++i) usleep(10000);  // 30 s: the test's end
    _exit(99);
  }
  close(fds[1]);
  ChildResult result;
  char c = 0;
  if (read(fds[0], &c, 1) == 1) {
    result.reported += c;
    after_start(child);
  }
  while (read(fds[0], &c, 1) == 1) result.reported += c;
  close(fds[0]);
  EXPECT_EQ(waitpid(child, &result.status, 0), child);
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

bool DiedOfSigterm(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM; }

void Terminate(pid_t pid) { kill(pid, SIGTERM); }
void Interrupt(pid_t pid) { kill(pid, SIGINT); }

// The drain reports which signal it drains: 't' SIGTERM, 'c' SIGINT.
void DrainNamingTheSignal() {
  const int drained = SigtermDrain::DrainedSignal();
  Report(drained == SIGTERM ? 't' : drained == SIGINT ? 'c' : '?');
}

// A child's SIGINT is SIG_IGN when the test runs in a shell's background job: the default,
// as in a terminal.
void DefaultSigint() { signal(SIGINT, SIG_DFL); }

TEST(SigtermDrainTest, TheDrainRunsAndTheProcessStillDiesOfSigterm) {
  const ChildResult result =
      RunChild([] { Report(SigtermDrain::Install(&DrainQuickly) ? 'i' : 'n'); }, Terminate);
  EXPECT_TRUE(DiedOfSigterm(result.status)) << result.status;
  EXPECT_EQ(result.reported, "id");
}

TEST(SigtermDrainTest, SigintIsDrainedTooAndTheProcessStillDiesOfSigint) {
  const ChildResult result = RunChild(
      [] {
        DefaultSigint();
        Report(SigtermDrain::Install(&DrainNamingTheSignal) ? 'i' : 'n');
      },
      Interrupt);
  EXPECT_TRUE(WIFSIGNALED(result.status) && WTERMSIG(result.status) == SIGINT) << result.status;
  EXPECT_EQ(result.reported, "ic");
}

TEST(SigtermDrainTest, TheDrainNamesSigterm) {
  const ChildResult result = RunChild(
      [] {
        DefaultSigint();
        Report(SigtermDrain::Install(&DrainNamingTheSignal) ? 'i' : 'n');
      },
      Terminate);
  EXPECT_TRUE(DiedOfSigterm(result.status)) << result.status;
  EXPECT_EQ(result.reported, "it");
}

TEST(SigtermDrainTest, AnIgnoredSigintStaysIgnoredWhileSigtermIsDrained) {
  const ChildResult result = RunChild(
      [] {
        signal(SIGINT, SIG_IGN);  // a shell's background job
        Report(SigtermDrain::Install(&DrainNamingTheSignal) ? 'i' : 'n');
        Report(signal(SIGINT, SIG_IGN) == SIG_IGN ? 'g' : 'x');
        kill(getpid(), SIGINT);  // ignored: nothing happens
        Report('s');
      },
      [](pid_t child) {
        usleep(300000);  // the child has checked and survived its SIGINT
        Terminate(child);
      });
  EXPECT_TRUE(DiedOfSigterm(result.status)) << result.status;
  EXPECT_EQ(result.reported, "igst");
}

TEST(SigtermDrainTest, ADrainThatHangsIsCutOffAtTheBound) {
  constexpr uint32_t kBoundMs = 300;
  const ChildResult result = RunChild(
      [] { Report(SigtermDrain::Install(&DrainForever, kBoundMs) ? 'i' : 'n'); }, Terminate);
  EXPECT_TRUE(DiedOfSigterm(result.status)) << result.status;
  EXPECT_EQ(result.reported, "is");
  EXPECT_LT(result.seconds, 20.0);  // not the child's 30 s wait: the bound ended it
}

TEST(SigtermDrainTest, ASecondSigtermEndsTheDrainAtOnce) {
  constexpr uint32_t kLongBoundMs = 60000;
  const ChildResult result =
      RunChild([] { Report(SigtermDrain::Install(&DrainForever, kLongBoundMs) ? 'i' : 'n'); },
               [](pid_t child) {
                 Terminate(child);
                 usleep(300000);  // the drain has started (or soon will): a second SIGTERM ends it
                 Terminate(child);
               });
  EXPECT_TRUE(DiedOfSigterm(result.status)) << result.status;
  EXPECT_EQ(result.reported.substr(0, 1), "i");
  EXPECT_LT(result.seconds, 20.0);  // neither the bound nor the child's wait
}

void ExitSeven(int) { _exit(7); }

TEST(SigtermDrainTest, AnApplicationsHandlerAndSigIgnAreLeftAlone) {
  ChildResult result = RunChild(
      [] {
        signal(SIGTERM, &ExitSeven);
        signal(SIGINT, &ExitSeven);
        Report(SigtermDrain::Install(&DrainQuickly) ? 'i' : 'n');
      },
      Terminate);
  EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 7) << result.status;
  EXPECT_EQ(result.reported, "n");

  result = RunChild(
      [] {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        Report(SigtermDrain::Install(&DrainQuickly) ? 'i' : 'n');
        Report(signal(SIGTERM, SIG_IGN) == SIG_IGN ? 'g' : 'x');  // still ignored
        _exit(0);
      },
      [](pid_t) {});
  EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0) << result.status;
  EXPECT_EQ(result.reported, "ng");
}

TEST(SigtermDrainTest, AHandlerTheApplicationInstallsLaterWins) {
  const ChildResult result = RunChild(
      [] {
        const bool installed = SigtermDrain::Install(&DrainQuickly);
        signal(SIGTERM, &ExitSeven);
        // Reported only now: the parent's SIGTERM follows the first byte, and one sent between
        // the install and signal() would reach the drain (a flaky "id" under load).
        Report(installed ? 'i' : 'n');
      },
      Terminate);
  EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 7) << result.status;
  EXPECT_EQ(result.reported, "i");  // no drain
}

// A grandchild forked after the install: with the atfork reset (what Session::OnForkChild
// does) and without it (a child made without fork's handlers), SIGTERM ends it as SIG_DFL does
// and never wakes its parent's drain.
void ForkAndTerminateGrandchild(bool reset) {
  const pid_t grandchild = fork();
  if (grandchild == 0) {
    if (reset) SigtermDrain::ResetInForkChild();
    for (int i = 0; i < 3000; ++i) usleep(10000);
    _exit(99);
  }
  usleep(100000);
  kill(grandchild, SIGTERM);
  int status = 0;
  Report(waitpid(grandchild, &status, 0) == grandchild && DiedOfSigterm(status) ? 'k' : 'x');
}

TEST(SigtermDrainTest, AForkedChildDiesOfSigtermWithoutDrainingItsParent) {
  for (bool reset : {true, false}) {
    const ChildResult result = RunChild(
        [reset] {
          Report(SigtermDrain::Install(&DrainQuickly) ? 'i' : 'n');
          ForkAndTerminateGrandchild(reset);
          usleep(300000);  // a drain woken by the grandchild would report by now
          _exit(0);
        },
        [](pid_t) {});
    EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0) << result.status;
    EXPECT_EQ(result.reported, "ik") << "reset " << reset;
  }
}

}  // namespace
}  // namespace flopscope::injector
