#include "client/run/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/connect/daemon_client.h"
#include "client/run/injector_locator.h"
#include "client/run/job_id_choice.h"
#include "client/run/ld_preload.h"
#include "client/run/python_program.h"
#include "common/endpoint.h"

namespace flopscope::client {
namespace {

std::string ChooseSocket(const RunOptions& options, const Environment& env) {
  if (options.socket.has_value()) return DaemonClient::NormalizeSocket(*options.socket);
  if (std::optional<std::string> from_env = env.GetNonEmpty("FLOPSCOPE_SOCKET")) {
    return DaemonClient::NormalizeSocket(*from_env);
  }
  return DaemonClient::NormalizeSocket(DefaultSocketPath());
}

namespace fs = std::filesystem;

// The canonical path of `path` when it is a regular file, else NOT_FOUND saying `what` and `fix`.
absl::StatusOr<std::string> ExistingFile(const fs::path& path, const std::string& what,
                                         const std::string& fix) {
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  if (error || !fs::is_regular_file(canonical, error)) {
    return absl::NotFoundError(
        absl::StrCat("--torch: ", what, " not found at ", path.string(), " (", fix, ")"));
  }
  return canonical.string();
}

absl::Status AddTorchSupport(const Environment& env, std::string_view self_exe,
                             std::string_view injector, Environment& job_env) {
  absl::StatusOr<TorchSupport> torch = LocateTorchSupport(env, self_exe, injector);
  if (!torch.ok()) return torch.status();
  job_env.Set("PYTHONPATH", PrependToSearchPath({torch->autostart_dir, torch->python_dir},
                                                env.Get("PYTHONPATH").value_or("")));
  job_env.Set(kTorchShimEnv, torch->shim);
  return absl::OkStatus();
}

std::optional<std::string> JobNotice(const JobIdChoice& choice) {
  switch (choice.source) {
    case JobIdChoice::Source::kGenerated:
      return absl::StrCat("job ", choice.job_id);
    case JobIdChoice::Source::kEnvironment:
      return absl::StrCat("job ", choice.job_id, " (from ", choice.variable, ")");
    case JobIdChoice::Source::kFlag:
      break;
  }
  return std::nullopt;
}

// What the daemon holds of the job's runs (`<job>`, `<job>.run<N>`); empty when it cannot say.
std::vector<HeldRun> HeldRunsOf(const DaemonClient& daemon, const std::string& job_id) {
  std::vector<HeldRun> held;
  absl::StatusOr<flopscope::v1::ListJobsResponse> jobs = daemon.ListJobs();
  if (!jobs.ok()) return held;
  for (const flopscope::v1::JobInfo& job : jobs->jobs()) {
    if (job.job_id() != job_id && !absl::StartsWith(job.job_id(), job_id + ".run")) continue;
    absl::StatusOr<flopscope::v1::ListRanksResponse> ranks = daemon.ListRanks(job.job_id());
    if (!ranks.ok()) return {};
    HeldRun& run = held.emplace_back();
    run.job_id = job.job_id();
    run.live = job.connected_sessions() > 0;
    for (const flopscope::v1::RankInfo& rank : ranks->ranks()) run.ranks.push_back(rank.rank());
  }
  return held;
}

void NumberRepeatedRunOn(const DaemonClient& daemon, RunPlan* plan) {
  const RunNumber number = NumberRun(plan->job_id, RankFromEnvironment(plan->environment),
                                     HeldRunsOf(daemon, plan->job_id));
  if (!number.notice.empty()) std::cerr << "flopscope: " << number.notice << "\n";
  if (number.job_id == plan->job_id) return;
  plan->job_id = number.job_id;
  plan->environment.Set("FLOPSCOPE_JOB_ID", number.job_id);
}

// --torch when asked, or when CMD is a Python program and the support is there (said in a
// notice); without it, PyTorch support found missing is no error.
absl::Status ChooseTorch(const RunOptions& options, const Environment& env,
                         std::string_view self_exe, std::string_view injector, RunPlan& plan) {
  if (options.torch) {
    plan.torch = true;
    return AddTorchSupport(env, self_exe, injector, plan.environment);
  }
  if (options.no_torch || !IsPythonProgram(options.command, env)) return absl::OkStatus();
  if (!AddTorchSupport(env, self_exe, injector, plan.environment).ok()) return absl::OkStatus();
  plan.torch = true;
  plan.notices.push_back(absl::StrCat("--torch chosen: ", options.command.front(),
                                      " is a Python program (--no-torch to opt out)"));
  return absl::OkStatus();
}

}  // namespace

void NumberRepeatedRun(const std::string& socket, RunPlan* plan) {
  NumberRepeatedRunOn(DaemonClient(socket), plan);
}

absl::StatusOr<TorchSupport> LocateTorchSupport(const Environment& env, std::string_view self_exe,
                                                std::string_view injector) {
  fs::path python_dir;
  if (std::optional<std::string> explicit_dir = env.GetNonEmpty(kPythonDirEnv)) {
    python_dir = *explicit_dir;
  } else if (!self_exe.empty()) {
    python_dir = (fs::path(self_exe).parent_path() / ".." / "python").lexically_normal();
  } else {
    return absl::NotFoundError(
        absl::StrCat("--torch: cannot tell where flopscope is installed; ", "set ", kPythonDirEnv));
  }
  const std::string fix = absl::StrCat("build the flopscope_torch target, or set ", kPythonDirEnv);
  absl::StatusOr<std::string> package = ExistingFile(python_dir / "flopscope_torch" / "__init__.py",
                                                     "the flopscope_torch package", fix);
  if (!package.ok()) return package.status();
  absl::StatusOr<std::string> autostart = ExistingFile(
      python_dir / "autostart" / "sitecustomize.py", "flopscope_torch's autostart", fix);
  if (!autostart.ok()) return autostart.status();

  const std::optional<std::string> explicit_shim = env.GetNonEmpty(kTorchShimEnv);
  absl::StatusOr<std::string> shim =
      explicit_shim.has_value()
          ? ExistingFile(*explicit_shim, kTorchShimName,
                         absl::StrCat("set by ", kTorchShimEnv, "; point it at ", kTorchShimName))
          : ExistingFile(
                fs::path(injector).parent_path() / kTorchShimName, kTorchShimName,
                absl::StrCat("build the flopscope_torch_nvtx target, or set ", kTorchShimEnv));
  if (!shim.ok()) return shim.status();

  TorchSupport support;
  support.python_dir = fs::path(*package).parent_path().parent_path().string();
  support.autostart_dir = fs::path(*autostart).parent_path().string();
  support.shim = *shim;
  return support;
}

std::string PrependToSearchPath(const std::vector<std::string>& entries, std::string_view current) {
  std::vector<std::string> merged = entries;
  if (!current.empty()) {
    // Empty entries are kept: Python reads one as the current directory.
    for (absl::string_view entry :
         absl::StrSplit(absl::string_view(current.data(), current.size()), ':')) {
      if (std::find(entries.begin(), entries.end(), entry) == entries.end()) {
        merged.emplace_back(entry);
      }
    }
  }
  return absl::StrJoin(merged, ":");
}

absl::StatusOr<RunPlan> PlanRun(const RunOptions& options, const Environment& env,
                                std::string_view self_exe, absl::Time now, absl::TimeZone zone,
                                int64_t pid) {
  if (options.command.empty() || options.command.front().empty()) {
    return absl::InvalidArgumentError(
        "run: no command given (usage: flopscope run [--job ID] [--socket S] [--torch] [--] CMD "
        "ARGS...)");
  }
  absl::StatusOr<std::string> injector = LocateInjector(env, self_exe);
  if (!injector.ok()) return injector.status();
  absl::StatusOr<std::string> preload =
      PrependToLdPreload(env.Get("LD_PRELOAD").value_or(""), *injector);
  if (!preload.ok()) return preload.status();
  absl::StatusOr<JobIdChoice> job =
      ChooseJobId(options.job_id, env, options.command.front(), now, zone, pid);
  if (!job.ok()) return job.status();

  RunPlan plan;
  plan.argv = options.command;
  plan.environment = env;
  plan.injector = *injector;
  plan.socket = ChooseSocket(options, env);
  plan.job_id = job->job_id;
  plan.environment.Set("LD_PRELOAD", *preload);
  plan.environment.Set("FLOPSCOPE_SOCKET", plan.socket);
  if (job->export_to_command) plan.environment.Set("FLOPSCOPE_JOB_ID", job->job_id);
  if (std::optional<std::string> notice = JobNotice(*job)) plan.notices.push_back(*notice);
  if (absl::Status torch = ChooseTorch(options, env, self_exe, *injector, plan); !torch.ok()) {
    return torch;
  }
  plan.number_repeated_run = job->source != JobIdChoice::Source::kGenerated && !options.append;
  return plan;
}

int ExecRun(const RunPlan& given, absl::Duration probe_timeout) {
  RunPlan plan = given;
  for (const std::string& notice : plan.notices) std::cerr << "flopscope: " << notice << "\n";
  {
    // Scoped so that the probe's channel is gone before exec.
    const DaemonClient daemon(plan.socket);
    if (absl::Status reachable = daemon.CheckReachable(probe_timeout); !reachable.ok()) {
      std::cerr << "flopscope: warning: " << reachable.message()
                << "; the job's records will be buffered until it starts\n";
    } else if (plan.number_repeated_run) {
      NumberRepeatedRunOn(daemon, &plan);
    }
  }
  std::vector<std::string> entries = plan.environment.ToEntries();
  std::vector<char*> envp;
  for (std::string& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = plan.argv;
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  const int error = errno;  // only reached when exec failed
  std::cerr << "flopscope: cannot run '" << plan.argv.front() << "': " << std::strerror(error)
            << "\n";
  return error == ENOENT ? 127 : 126;
}

}  // namespace flopscope::client
