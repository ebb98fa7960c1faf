#include "client/commands/embedded_run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands/query_commands.h"
#include "client/connect/daemon_client.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

constexpr absl::Duration kProbeTimeout = absl::Milliseconds(200);

volatile sig_atomic_t job_pid = 0;

// SIGTERM and SIGHUP sent to `run` are the job's: handed on, and `run` waits for it to end.
void ForwardToJob(int signal_number) {
  if (job_pid > 0) kill(job_pid, signal_number);
}

void Say(const std::string& line) { std::cerr << "flopscope: " << line << "\n" << std::flush; }

// Ignores SIGINT and SIGQUIT (a terminal sends them to the job as well, which drains and ends)
// and forwards SIGTERM and SIGHUP while it lives; restores them when it goes.
class JobSignals {
 public:
  explicit JobSignals(pid_t pid) {
    job_pid = pid;
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction forward = {};
    forward.sa_handler = ForwardToJob;
    sigaction(SIGINT, &ignore, &old_[0]);
    sigaction(SIGQUIT, &ignore, &old_[1]);
    sigaction(SIGTERM, &forward, &old_[2]);
    sigaction(SIGHUP, &forward, &old_[3]);
  }
  ~JobSignals() {
    const int signals[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};
    for (int i = 0; i < 4; ++i) sigaction(signals[i], &old_[i], nullptr);
    job_pid = 0;
  }

 private:
  struct sigaction old_[4];
};

// Runs the plan's command as a child and waits for it. The wait status, or 127 / 126 (as shells
// do) in `*failed_exit` when the command could not be started, said on stderr.
int RunJob(const RunPlan& plan, int* failed_exit) {
  std::vector<std::string> entries = plan.environment.ToEntries();
  std::vector<char*> envp;
  for (std::string& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = plan.argv;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) error_pipe[0] = error_pipe[1] = -1;
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    if (error_pipe[1] >= 0) (void)!write(error_pipe[1], &error, sizeof error);
    _exit(127);
  }
  if (error_pipe[1] >= 0) close(error_pipe[1]);
  int status = 0;
  {
    const JobSignals signals(pid);
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  int exec_error = 0;
  if (pid < 0) exec_error = errno;
  if (error_pipe[0] >= 0) {
    if (pid > 0 && read(error_pipe[0], &exec_error, sizeof exec_error) != sizeof exec_error) {
      exec_error = 0;
    }
    close(error_pipe[0]);
  }
  if (exec_error != 0) {
    Say(absl::StrCat("cannot run '", plan.argv.front(), "': ", std::strerror(exec_error)));
    *failed_exit = exec_error == ENOENT ? 127 : 126;
  }
  return status;
}

// What the daemon holds of the job: its range events, or nullopt when the job is not there.
std::optional<uint64_t> RangeEventsOf(const std::string& socket, const std::string& job_id) {
  absl::StatusOr<flopscope::v1::ListJobsResponse> jobs = DaemonClient(socket).ListJobs();
  if (!jobs.ok()) return std::nullopt;
  for (const flopscope::v1::JobInfo& job : jobs->jobs()) {
    if (job.job_id() == job_id) return job.range_events();
  }
  return std::nullopt;
}

// The job's report on stdout and its HTML report in the data directory, as `flopscope report`
// writes them; or the line that says it recorded no module range.
void ReportTheJob(const RunPlan& plan, const PrivateDaemon& daemon) {
  const std::optional<uint64_t> ranges = RangeEventsOf(daemon.socket(), plan.job_id);
  if (!ranges.has_value() || *ranges == 0) {
    Say(NoModuleRangeMessage(plan.job_id, plan.torch, plan.argv));
    return;
  }
  ReportOptions report;
  report.job_id = plan.job_id;
  report.socket = daemon.socket();
  if (absl::Status text = ReportCommand(report); !text.ok()) {
    Say(absl::StrCat("report: ", text.message()));
  }
  std::cout.flush();
  report.format = "html";
  report.output = (fs::path(daemon.data_dir()) / (plan.job_id + ".html")).string();
  if (absl::Status html = ReportCommand(report); !html.ok()) {
    Say(absl::StrCat("HTML report: ", html.message()));
  } else {
    Say(absl::StrCat("HTML report: ", report.output));
  }
}

// --no-keep-data: everything in the data directory but the HTML reports goes.
void DeleteRecords(const std::string& data_dir) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(data_dir, error)) {
    if (entry.path().extension() != ".html") fs::remove_all(entry.path(), error);
  }
}

// The exit status `run` gives for the job's wait status; a job killed by a signal kills `run`
// with the same signal (no core file of `run`'s own), as exec would have.
int ExitLikeTheJob(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (!WIFSIGNALED(wait_status)) return 1;
  const int signal_number = WTERMSIG(wait_status);
  std::cout.flush();
  std::fflush(nullptr);
  const struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
  return 128 + signal_number;
}

// The job under a private daemon on the kept-runs directory; nullopt when the daemon could not
// start (said, with why), and the caller runs the job as ExecRun does.
std::optional<int> RunWithPrivateDaemon(RunPlan plan, const RunOptions& options,
                                        const Environment& env, std::string_view self_exe) {
  absl::StatusOr<std::string> binary = LocateDaemonBinary(env, self_exe);
  const std::string runs = KeptRunsDir(env);
  if (!binary.ok() || runs.empty()) {
    Say(absl::StrCat(
        "no daemon at ", plan.socket, " and no private one can be started: ",
        binary.ok() ? "neither XDG_DATA_HOME nor HOME is set" : binary.status().message()));
    return std::nullopt;
  }
  PrivateDaemon::Config config;
  config.binary = *binary;
  config.data_dir = (fs::path(runs) / RunDirName(plan.job_id)).string();
  config.log_path = (fs::path(config.data_dir) / "flopscoped.log").string();
  absl::StatusOr<std::unique_ptr<PrivateDaemon>> daemon = PrivateDaemon::Start(config, env);
  if (!daemon.ok()) {
    Say(absl::StrCat("no daemon at ", plan.socket,
                     " and the private one did not start: ", daemon.status().message()));
    return std::nullopt;
  }
  for (const std::string& notice : plan.notices) Say(notice);
  Say(absl::StrCat("no daemon at ", plan.socket, "; a private one records this job in ",
                   config.data_dir));
  plan.socket = (*daemon)->socket();
  plan.environment.Set("FLOPSCOPE_SOCKET", plan.socket);
  if (plan.number_repeated_run) NumberRepeatedRun(plan.socket, &plan);

  int failed_exit = 0;
  const int wait_status = RunJob(plan, &failed_exit);
  if (failed_exit != 0) return failed_exit;
  ReportTheJob(plan, **daemon);
  if (absl::Status stopped = (*daemon)->Stop(); !stopped.ok()) Say(std::string(stopped.message()));
  if (options.keep_data) {
    Say(absl::StrCat("the job's data stays in ", config.data_dir,
                     "; read it again with: flopscope report ", plan.job_id));
  } else {
    DeleteRecords(config.data_dir);
    Say(absl::StrCat("the job's records were deleted (--no-keep-data)"));
  }
  return ExitLikeTheJob(wait_status);
}

// Whether the job gets a private daemon: nothing named a daemon or forbade one, and the planned
// one does not answer.
bool WantsPrivateDaemon(const RunOptions& options, const RunPlan& plan, const Environment& env) {
  if (options.socket.has_value() || options.no_private_daemon || LaunchedPerRank(env)) {
    return false;
  }
  return !DaemonClient(plan.socket).CheckReachable(kProbeTimeout).ok();
}

}  // namespace

bool LaunchedPerRank(const Environment& env) {
  for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    int size = 0;
    if (absl::SimpleAtoi(env.GetNonEmpty(name).value_or(""), &size) && size > 1) return true;
  }
  return false;
}

std::string NoModuleRangeMessage(const std::string& job_id, bool torch,
                                 const std::vector<std::string>& command) {
  const std::string cause =
      torch ? "--torch was on, so the program never imported torch or ran no module, and "
              "marked no NVTX range"
            : "no --torch? the program never imported torch? no NVTX ranges?";
  const std::string fix =
      torch ? "mark its modules with NVTX ranges (docs/marks.md)"
            : absl::StrCat("try: flopscope run --torch -- ", absl::StrJoin(command, " "),
                           " (PyTorch), or mark modules with NVTX ranges (docs/marks.md)");
  return absl::StrCat("job ", job_id, " recorded no module range (", cause, "); ", fix);
}

int RunCommand(const RunOptions& options, const Environment& env, std::string_view self_exe,
               absl::Time now, absl::TimeZone zone, int64_t pid) {
  absl::StatusOr<RunPlan> plan = PlanRun(options, env, self_exe, now, zone, pid);
  if (!plan.ok()) {
    Say(std::string(plan.status().message()));
    return 2;  // every planning error is the user's to fix (see PlanRun)
  }
  if (WantsPrivateDaemon(options, *plan, env)) {
    if (std::optional<int> exit = RunWithPrivateDaemon(*plan, options, env, self_exe)) {
      return *exit;
    }
  }
  return ExecRun(*plan);
}

std::unique_ptr<PrivateDaemon> ServeKeptRunIfNoDaemon(const std::string& job_id,
                                                      const std::string& socket,
                                                      const Environment& env,
                                                      std::string_view self_exe) {
  const std::string data_dir = FindKeptRun(env, job_id);
  if (data_dir.empty() || DaemonClient(socket).CheckReachable(kProbeTimeout).ok()) return nullptr;
  absl::StatusOr<std::string> binary = LocateDaemonBinary(env, self_exe);
  if (!binary.ok()) {
    Say(absl::StrCat("cannot read the kept run in ", data_dir, ": ", binary.status().message()));
    return nullptr;
  }
  PrivateDaemon::Config config;
  config.binary = *binary;
  config.data_dir = data_dir;
  config.log_path = (fs::path(data_dir) / "flopscoped.log").string();
  absl::StatusOr<std::unique_ptr<PrivateDaemon>> daemon = PrivateDaemon::Start(config, env);
  if (!daemon.ok()) {
    Say(absl::StrCat("cannot read the kept run in ", data_dir, ": ", daemon.status().message()));
    return nullptr;
  }
  Say(absl::StrCat("no daemon at ", socket, "; reading the run kept in ", data_dir));
  return std::move(*daemon);
}

}  // namespace flopscope::client
