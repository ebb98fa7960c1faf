#include "client/run_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/daemon_client.h"
#include "client/injector_locator.h"
#include "client/job_id_choice.h"
#include "client/ld_preload.h"
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

}  // namespace

absl::StatusOr<RunPlan> PlanRun(const RunOptions& options, const Environment& env,
                                std::string_view self_exe, absl::Time now, absl::TimeZone zone) {
  if (options.command.empty() || options.command.front().empty()) {
    return absl::InvalidArgumentError(
        "run: no command given (usage: flopscope run [--job ID] [--socket S] [--] CMD ARGS...)");
  }
  absl::StatusOr<std::string> injector = LocateInjector(env, self_exe);
  if (!injector.ok()) return injector.status();
  absl::StatusOr<std::string> preload =
      PrependToLdPreload(env.Get("LD_PRELOAD").value_or(""), *injector);
  if (!preload.ok()) return preload.status();
  absl::StatusOr<JobIdChoice> job =
      ChooseJobId(options.job_id, env, options.command.front(), now, zone);
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
  return plan;
}

int ExecRun(const RunPlan& plan, absl::Duration probe_timeout) {
  for (const std::string& notice : plan.notices) std::cerr << "flopscope: " << notice << "\n";
  {
    // Scoped so that the probe's channel is gone before exec.
    const DaemonClient daemon(plan.socket);
    if (absl::Status reachable = daemon.CheckReachable(probe_timeout); !reachable.ok()) {
      std::cerr << "flopscope: warning: " << reachable.message()
                << "; the job's records will be buffered until it starts\n";
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
