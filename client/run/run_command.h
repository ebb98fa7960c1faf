#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/connect/environment.h"

namespace flopscope::client {

// `flopscope run [--job ID] [--append] [--socket S] [--torch|--no-torch] [--keep-data|
// --no-keep-data] [--no-private-daemon] [--] CMD ARGS...`
struct RunOptions {
  std::optional<std::string> job_id;
  std::optional<std::string> socket;
  bool torch = false;  // turn flopscope_torch's module hooks on in every Python process of CMD
  // Never turn --torch on by itself (it is, for a Python program: IsPythonProgram).
  bool no_torch = false;
  bool append = false;  // keep the given job id even when a finished run holds it (no .run<N>)
  // With no daemon reachable (and no --socket), a private one serves the job
  // (commands/embedded_run.h); these say whether its data stays, and whether to start one.
  bool keep_data = true;
  bool no_private_daemon = false;
  std::vector<std::string> command;
};

// Where `--torch` finds the PyTorch support (see python/CMakeLists.txt for the build layout).
inline constexpr char kPythonDirEnv[] = "FLOPSCOPE_PYTHON_DIR";
inline constexpr char kTorchShimEnv[] = "FLOPSCOPE_TORCH_NVTX_LIB";
inline constexpr char kTorchShimName[] = "libflopscope_torch_nvtx.so";

struct TorchSupport {
  std::string python_dir;     // holds the flopscope_torch package
  std::string autostart_dir;  // holds the sitecustomize.py that turns the hooks on
  std::string shim;           // libflopscope_torch_nvtx.so
};

// $FLOPSCOPE_PYTHON_DIR, else `<directory of self_exe>/../python`, must hold
// flopscope_torch/__init__.py and autostart/sitecustomize.py; the shim is
// $FLOPSCOPE_TORCH_NVTX_LIB, else libflopscope_torch_nvtx.so beside the injector. Absolute
// canonical paths, or NOT_FOUND naming what is missing and how to fix it.
absl::StatusOr<TorchSupport> LocateTorchSupport(const Environment& env, std::string_view self_exe,
                                                std::string_view injector);

// `entries` first, then the entries of `current` (a PATH-style list) that are not among them.
std::string PrependToSearchPath(const std::vector<std::string>& entries, std::string_view current);

// What `run` will execute: the command, the environment it gets and what to tell the user.
struct RunPlan {
  std::vector<std::string> argv;
  Environment environment;
  std::string injector;  // absolute path of libflopscope_inject.so
  std::string socket;    // where the job's injector will send its records
  std::string job_id;
  std::vector<std::string> notices;  // lines for stderr, without the "flopscope: " prefix
  // The id was given (--job or the environment), so a finished earlier run may hold it: ExecRun
  // asks the daemon and keeps this run apart as `<job>.run<N>` (NumberRun).
  bool number_repeated_run = false;
  bool torch = false;  // --torch is on (given, or chosen because CMD is a Python program)
};

// Works out the plan without side effects: locates the injector (see LocateInjector), puts it
// first in LD_PRELOAD, exports FLOPSCOPE_SOCKET (--socket, else $FLOPSCOPE_SOCKET, else
// DefaultSocketPath()) and FLOPSCOPE_JOB_ID (see ChooseJobId). With `torch` (or without
// `no_torch` when CMD is a Python program and the PyTorch support is there, said in a notice), also
// puts the
// autostart and package directories first on PYTHONPATH and exports FLOPSCOPE_TORCH_NVTX_LIB (see
// LocateTorchSupport). Every error is the user's to fix (missing injector or PyTorch support,
// malformed job id, no command) and means exit status 2.
// `pid`: this process's id (the command's, after exec), which keeps generated job ids of runs
// started in the same second apart; 0 leaves it out.
absl::StatusOr<RunPlan> PlanRun(const RunOptions& options, const Environment& env,
                                std::string_view self_exe, absl::Time now, absl::TimeZone zone,
                                int64_t pid = 0);

// A second run under a finished job's id gets its own id (NumberRun), exported and said on
// stderr; `socket`: the daemon that holds the job's earlier runs.
void NumberRepeatedRun(const std::string& socket, RunPlan* plan);

// Prints the notices, warns when the daemon does not answer within `probe_timeout` (the job runs
// anyway: its injector buffers until the daemon comes), numbers a repeated run (exporting the
// new FLOPSCOPE_JOB_ID and saying so), then replaces this process with the
// command, so its exit status and a death by signal reach the caller unchanged. Returns only when
// the command cannot be started: 127 when it was not found, 126 otherwise (as shells do).
int ExecRun(const RunPlan& plan, absl::Duration probe_timeout = absl::Milliseconds(200));

}  // namespace flopscope::client
