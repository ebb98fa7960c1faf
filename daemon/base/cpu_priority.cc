#include "daemon/base/cpu_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace flopscope::daemon {
namespace {

constexpr char kAutogroupFile[] = "/proc/self/autogroup";

int ThreadCount() {
  std::error_code ignored;
  int count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", ignored), end;
       !ignored && it != end; it.increment(ignored)) {
    ++count;
  }
  return count;
}

// The nice value in /proc/self/autogroup ("/autogroup-712 nice -10"); nullopt where the kernel
// has no autogroup (built without it: no such file).
std::optional<int> SessionNice() {
  std::ifstream in(kAutogroupFile);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  int nice = 0;
  if (words.size() != 3 || words[1] != "nice" || !absl::SimpleAtoi(words[2], &nice)) {
    return std::nullopt;
  }
  return nice;
}

std::string NeedsPrivilege(int nice, int err) {
  return absl::StrCat("nice ", nice, " ",
                      err == EPERM || err == EACCES
                          ? "needs CAP_SYS_NICE (root, or Nice= in the daemon's service)"
                          : std::strerror(err));
}

void SetThreadsNice(int nice, CpuPriorityOutcome* outcome) {
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, 0);  // -1 is a valid value: errno tells
  if (errno != 0) {
    outcome->note = absl::StrCat("cannot read the priority: ", std::strerror(errno));
    return;
  }
  outcome->threads_nice = now;
  if (now == nice) return;  // e.g. a unit's Nice=: no system call (its seccomp filter)
  if (setpriority(PRIO_PROCESS, 0, nice) != 0) {
    outcome->note = absl::StrCat("kept nice ", now, ": ", NeedsPrivilege(nice, errno));
    return;
  }
  outcome->threads_nice = nice;
}

void SetSessionNice(int nice, CpuPriorityOutcome* outcome) {
  if (getsid(0) != getpid()) return;  // not our session: a shell's, a launcher's
  const std::optional<int> now = SessionNice();
  if (!now.has_value()) return;  // no autogroup in this kernel
  if (*now == nice) {
    outcome->session_set = true;
    return;
  }
  std::ofstream out(kAutogroupFile);
  out << nice;
  out.flush();
  if (!out) {
    const int err = errno;
    if (!outcome->note.empty()) return;  // the threads' note says the same
    outcome->note = absl::StrCat("kept the session's nice ", *now, ": ", NeedsPrivilege(nice, err));
    return;
  }
  outcome->session_set = true;
}

// Whether CAP_SYS_NICE is in the process's effective set ("CapEff:" of /proc/self/status).
bool HasSysNice() {
  constexpr int kCapSysNice = 23;  // linux/capability.h
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "CapEff:")) continue;
    uint64_t mask = 0;
    const absl::string_view hex = absl::StripAsciiWhitespace(absl::string_view(line).substr(7));
    return absl::SimpleHexAtoi(hex, &mask) && (mask >> kCapSysNice & 1) != 0;
  }
  return false;
}

}  // namespace

bool MayLowerNiceTo(int nice) {
  if (HasSysNice()) return true;
  rlimit limit{};
  // RLIMIT_NICE's value r allows nice values down to 20 - r.
  return getrlimit(RLIMIT_NICE, &limit) == 0 &&
         (limit.rlim_cur == RLIM_INFINITY || 20 - static_cast<int64_t>(limit.rlim_cur) <= nice);
}

ScopedThreadNice::ScopedThreadNice(int nice) {
  const id_t thread = static_cast<id_t>(gettid());
  errno = 0;
  before_ = getpriority(PRIO_PROCESS, thread);  // -1 is a valid value: errno tells
  if (errno != 0 || nice <= before_ || !MayLowerNiceTo(before_)) return;
  applied_ = setpriority(PRIO_PROCESS, thread, nice) == 0;
}

ScopedThreadNice::~ScopedThreadNice() {
  if (!applied_) return;
  // Allowed (checked before the change); a failure would leave this thread behind the queries,
  // which slows its next query and loses nothing.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), before_);
}

absl::Status RaiseCpuPriority(int nice, CpuPriorityOutcome* outcome) {
  *outcome = CpuPriorityOutcome{};
  if (nice < -20 || nice > 19) {
    return absl::InvalidArgumentError(absl::StrCat("--nice ", nice, " is not in -20..19"));
  }
  // Affinity check: threads started before would keep their priority (nice is per thread).
  if (const int threads = ThreadCount(); threads > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RaiseCpuPriority must run before any thread starts; ", threads, " are running"));
  }
  SetThreadsNice(nice, outcome);
  SetSessionNice(nice, outcome);
  return absl::OkStatus();
}

}  // namespace flopscope::daemon
