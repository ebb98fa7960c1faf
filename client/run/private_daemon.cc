#include "client/run/private_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/connect/daemon_client.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

constexpr char kDaemonName[] = "flopscoped";

bool IsExecutableFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

// A directory owned by this user that no one else may enter.
bool IsPrivateDirectory(const std::string& dir) {
  struct stat info;
  if (dir.empty() || stat(dir.c_str(), &info) != 0) return false;
  return S_ISDIR(info.st_mode) && info.st_uid == getuid() && (info.st_mode & 077) == 0;
}

// A new 0700 directory for the daemon's socket (mkdtemp makes it 0700 and the user's own).
absl::StatusOr<std::string> MakeSocketDir(const Environment& env) {
  std::string base = env.GetNonEmpty("XDG_RUNTIME_DIR").value_or("");
  if (!IsPrivateDirectory(base)) base = env.GetNonEmpty("TMPDIR").value_or("/tmp");
  std::string pattern = absl::StrCat(base, "/flopscope-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a private socket directory in ", base, ": ", strerror(errno)));
  }
  return pattern;
}

// The last `lines` lines of the daemon's log, indented, for an error message.
std::string LogTail(const std::string& log_path, size_t lines) {
  std::ifstream in(log_path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string tail;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    absl::StrAppend(&tail, "\n  ", all[i]);
  }
  return tail.empty() ? std::string(" (its log is empty)")
                      : absl::StrCat(" (", log_path, "):", tail);
}

// Forks the daemon: its own process group, SIGTERM when the parent dies, output to `log_fd`.
// Only async-signal-safe calls in the child (the parent may have gRPC threads).
absl::StatusOr<pid_t> SpawnDaemon(const std::vector<std::string>& args, int log_fd) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the parent is already gone
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

absl::StatusOr<std::string> LocateDaemonBinary(const Environment& env, std::string_view self_exe) {
  std::string beside;
  if (!self_exe.empty()) {
    beside = (fs::path(self_exe).parent_path() / kDaemonName).string();
    if (IsExecutableFile(beside)) return beside;
  }
  for (absl::string_view dir : absl::StrSplit(env.Get("PATH").value_or(""), ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(std::string(dir)) / kDaemonName;
    if (IsExecutableFile(candidate)) return candidate.string();
  }
  return absl::NotFoundError(absl::StrCat(kDaemonName, " not found ",
                                          beside.empty() ? "" : absl::StrCat("at ", beside, " "),
                                          "nor on PATH (install it beside flopscope)"));
}

std::string KeptRunsDir(const Environment& env) {
  if (std::optional<std::string> data_home = env.GetNonEmpty("XDG_DATA_HOME")) {
    return absl::StrCat(*data_home, "/flopscope/runs");
  }
  if (std::optional<std::string> home = env.GetNonEmpty("HOME")) {
    return absl::StrCat(*home, "/.local/share/flopscope/runs");
  }
  return "";
}

std::string RunDirName(const std::string& job_id) {
  const size_t dot = job_id.rfind(".run");
  int number = 0;
  if (dot != std::string::npos && dot > 0 &&
      absl::SimpleAtoi(absl::string_view(job_id).substr(dot + 4), &number) && number >= 2) {
    return job_id.substr(0, dot);
  }
  return job_id;
}

std::string FindKeptRun(const Environment& env, const std::string& job_id) {
  const std::string runs = KeptRunsDir(env);
  if (runs.empty() || job_id.empty() || absl::StrContains(job_id, '/') || job_id[0] == '.') {
    return "";
  }
  for (const std::string& name : {job_id, RunDirName(job_id)}) {
    const fs::path dir = fs::path(runs) / name;
    std::error_code error;
    if (fs::is_directory(dir, error)) return dir.string();
  }
  return "";
}

PrivateDaemon::PrivateDaemon(pid_t pid, std::string socket_dir, std::string data_dir,
                             std::string log_path)
    : pid_(pid),
      socket_dir_(std::move(socket_dir)),
      socket_(socket_dir_ + "/flopscoped.sock"),
      data_dir_(std::move(data_dir)),
      log_path_(std::move(log_path)) {}

PrivateDaemon::~PrivateDaemon() {
  if (!stopped_) Stop().IgnoreError();
}

absl::StatusOr<std::unique_ptr<PrivateDaemon>> PrivateDaemon::Start(const Config& config,
                                                                    const Environment& env) {
  std::error_code error;
  fs::create_directories(config.data_dir, error);
  if (error || chmod(config.data_dir.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create the data directory ", config.data_dir, ": ",
                     error ? error.message() : std::string(strerror(errno))));
  }
  absl::StatusOr<std::string> socket_dir = MakeSocketDir(env);
  if (!socket_dir.ok()) return socket_dir.status();
  const int log_fd = open(config.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open the daemon's log ", config.log_path, ": ", strerror(errno)));
  }
  const std::string socket = *socket_dir + "/flopscoped.sock";
  // No --collect-spools patterns: a private daemon takes no other session's orphaned spools.
  absl::StatusOr<pid_t> pid = SpawnDaemon(
      {config.binary, "--socket", socket, "--data-dir", config.data_dir, "--collect-spools"},
      log_fd);
  close(log_fd);
  if (!pid.ok()) {
    fs::remove_all(*socket_dir, error);
    return pid.status();
  }
  std::unique_ptr<PrivateDaemon> daemon(
      new PrivateDaemon(*pid, *socket_dir, config.data_dir, config.log_path));
  if (absl::Status serving = daemon->WaitUntilServing(config.start_timeout); !serving.ok()) {
    daemon->Stop().IgnoreError();
    return serving;
  }
  return daemon;
}

absl::Status PrivateDaemon::WaitUntilServing(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const DaemonClient client(socket_, absl::Seconds(2));
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      stopped_ = true;
      return absl::UnavailableError(
          absl::StrCat("the private flopscoped exited before serving", LogTail(log_path_, 5)));
    }
    std::error_code error;
    if (fs::exists(socket_, error) && client.ListJobs().ok()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("the private flopscoped did not serve within ",
                                                  absl::FormatDuration(timeout),
                                                  LogTail(log_path_, 5)));
}

absl::Status PrivateDaemon::Stop(absl::Duration timeout) {
  absl::Status result = absl::OkStatus();
  if (!stopped_) {
    stopped_ = true;
    kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + timeout;
    int status = 0;
    pid_t waited = 0;
    while ((waited = waitpid(pid_, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (waited == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      result = absl::DeadlineExceededError(
          absl::StrCat("the private flopscoped ignored SIGTERM for ", absl::FormatDuration(timeout),
                       "; killed", LogTail(log_path_, 5)));
    } else if (waited == pid_ && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      result = absl::InternalError(
          absl::StrCat("the private flopscoped did not stop cleanly", LogTail(log_path_, 5)));
    }
  }
  std::error_code error;
  fs::remove_all(socket_dir_, error);
  return result;
}

}  // namespace flopscope::client
