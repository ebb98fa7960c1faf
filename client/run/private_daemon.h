#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/connect/environment.h"

namespace flopscope::client {

// The daemon `flopscope run` starts for one job when none is reachable (issue 32 item 1,
// docs/design/private-daemon.md): a `flopscoped` of the user's own, on a data directory under
// the user's home and a socket in a private directory, serving nobody else. `flopscope report`
// starts one the same way on a kept run's data.

// `flopscoped` beside `self_exe` (the build and install layout), else the first on $PATH;
// NOT_FOUND naming both places otherwise.
absl::StatusOr<std::string> LocateDaemonBinary(const Environment& env, std::string_view self_exe);

// Where private runs keep their data: $XDG_DATA_HOME/flopscope/runs, else
// $HOME/.local/share/flopscope/runs; "" when neither variable is set.
std::string KeptRunsDir(const Environment& env);

// The kept data directory of `job_id` under KeptRunsDir (a repeated run `<job>.run<N>` lives in
// `<job>`'s); "" when it does not exist.
std::string FindKeptRun(const Environment& env, const std::string& job_id);

// The job id a run's data directory is named after: `job_id` without a `.run<N>` suffix.
std::string RunDirName(const std::string& job_id);

class PrivateDaemon {
 public:
  struct Config {
    std::string binary;    // flopscoped
    std::string data_dir;  // created (0700) when missing
    std::string log_path;  // the daemon's stdout and stderr, appended
    absl::Duration start_timeout = absl::Seconds(30);
  };

  // Starts the daemon on a socket in a new 0700 directory ($XDG_RUNTIME_DIR when it is the
  // user's own and private, else $TMPDIR or /tmp), in a process group of its own (a Ctrl-C at
  // the terminal reaches the job, not the daemon that must still take its last records) and
  // ended with SIGTERM should this process die first; returns once it answers a query. The
  // error (the daemon exited, or did not serve in time) quotes the end of its log.
  static absl::StatusOr<std::unique_ptr<PrivateDaemon>> Start(const Config& config,
                                                              const Environment& env);

  PrivateDaemon(const PrivateDaemon&) = delete;
  PrivateDaemon& operator=(const PrivateDaemon&) = delete;
  ~PrivateDaemon();  // Stop() when not yet stopped

  const std::string& socket() const { return socket_; }
  const std::string& data_dir() const { return data_dir_; }

  // SIGTERM, then waits up to `timeout` for a clean exit (SIGKILL after it: an error); the
  // socket directory is removed. OK only when the daemon exited with status 0.
  absl::Status Stop(absl::Duration timeout = absl::Seconds(30));

 private:
  PrivateDaemon(pid_t pid, std::string socket_dir, std::string data_dir, std::string log_path);
  absl::Status WaitUntilServing(absl::Duration timeout);

  pid_t pid_;
  std::string socket_dir_;
  std::string socket_;
  std::string data_dir_;
  std::string log_path_;
  bool stopped_ = false;
};

}  // namespace flopscope::client
