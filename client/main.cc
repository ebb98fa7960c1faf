// flopscope: the command-line client. This file only wires the command line to the commands in
// flopscope_client_lib (run_command, query_commands).
#include <grpc/grpc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/commands/command_names.h"
#include "client/commands/counter_window_command.h"
#include "client/commands/counters_command.h"
#include "client/commands/embedded_run.h"
#include "client/commands/profile_commands.h"
#include "client/commands/prune_command.h"
#include "client/commands/query_commands.h"
#include "client/commands/where_command.h"
#include "client/connect/daemon_address.h"
#include "client/connect/environment.h"
#include "client/run/injector_locator.h"
#include "client/run/run_arguments.h"
#include "client/run/run_command.h"
#include "client/trace_export/export_command.h"
#include "common/endpoint.h"
#include "common/version.h"
#include "importer/import_command.h"

namespace {

namespace client = flopscope::client;

constexpr int kUsageExit = 2;

// What the command line fills in, one member per subcommand.
struct CommandLine {
  CLI::App* run = nullptr;
  CLI::App* jobs = nullptr;
  CLI::App* report = nullptr;
  CLI::App* import = nullptr;
  CLI::App* ranks = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* profile = nullptr;
  CLI::App* counters = nullptr;
  CLI::App* export_trace = nullptr;
  CLI::App* prune = nullptr;
  CLI::App* where = nullptr;
  client::PruneOptions prune_options;
  client::WhereOptions where_options;
  client::ExportOptions export_options;
  client::CountersOptions counters_options;
  client::DiffOptions diff_options;
  client::CounterWindowOptions profile_options;
  client::RunOptions run_options;
  std::vector<std::string> run_command_for_help;
  std::string help_topic_for_help;  // `help CMD`: listed for its usage line only
  client::JobsOptions jobs_options;
  client::ReportOptions report_options;
  client::RanksOptions ranks_options;
  flopscope::importer::ImportOptions import_options;
  bool import_no_progress = false;
  // --socket, --server and --tls-* of whichever command was given (only one is parsed).
  client::DaemonAddressFlags address;
};

std::string SocketHelp() {
  return "daemon socket path or gRPC target (default: $FLOPSCOPE_SOCKET, else the node "
         "daemon's /run/flopscope/flopscope.sock, or a personal daemon's "
         "$XDG_RUNTIME_DIR/flopscope.sock; here: " +
         flopscope::DefaultSocketPath() + ")";
}

// --socket, or --server with its --tls-* files: which daemon a command talks to.
void AddDaemonAddress(CLI::App* command, CommandLine& line) {
  client::DaemonAddressFlags& address = line.address;
  command->add_option("--socket", address.socket, SocketHelp());
  command->add_option("--server", address.server,
                      "ask the daemon at HOST:PORT over mutual TLS instead (an aggregator, or "
                      "flopscoped --tcp on another host; default: $FLOPSCOPE_SERVER)");
  command->add_option("--tls-cert", address.tls.cert,
                      "with --server: your PEM certificate (default: $FLOPSCOPE_TLS_CERT)");
  command->add_option("--tls-key", address.tls.key,
                      "with --server: its PEM private key (default: $FLOPSCOPE_TLS_KEY)");
  command->add_option("--tls-ca", address.tls.ca,
                      "with --server: the PEM CA that signed the daemon's certificate (default: "
                      "$FLOPSCOPE_TLS_CA)");
}

// The daemon address into every command's options (only the parsed one is used).
absl::Status ResolveAddress(CommandLine& line) {
  absl::StatusOr<client::DaemonAddress> address =
      client::ResolveDaemonAddress(line.address, client::Environment::FromProcess());
  if (!address.ok()) return address.status();
  auto assign = [&address](auto& options) {
    options.socket = address->socket;
    options.tls = address->tls;
  };
  assign(line.jobs_options);
  assign(line.report_options);
  assign(line.ranks_options);
  assign(line.diff_options);
  assign(line.profile_options);
  assign(line.export_options);
  assign(line.import_options);
  assign(line.prune_options);
  assign(line.where_options);
  return absl::OkStatus();
}

void AddRun(CLI::App& app, CommandLine& line) {
  line.run = app.add_subcommand(
      "run",
      "Run CMD under the injector; its exit status is flopscope's. Options after CMD are "
      "CMD's own. FLOPs are estimated (--torch) or announced unless counted: for measured "
      "FLOPs start CMD with FLOPSCOPE_COUNTERS=steps=3:4 in its environment (hardware counters "
      "over steps 3-4), or run `flopscope profile JOB --count N` while it runs");
  line.run->add_option("--job", line.run_options.job_id,
                       "job id (default: FLOPSCOPE_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID, "
                       "else <cmd>-<YYYYmmdd-HHMMSS>-<pid>); a second run under the id of a "
                       "finished job becomes <job>.run2, .run3, ... (said on stderr)");
  line.run->add_flag("--append", line.run_options.append,
                     "record into the job id as given even when a finished run holds it (a "
                     "rank restarted by hand) instead of starting <job>.run<N>");
  line.run->add_option("--socket", line.run_options.socket, SocketHelp());
  line.run->add_flag("--torch", line.run_options.torch,
                     "record PyTorch modules, steps and phases with no change to CMD: every "
                     "Python process of CMD turns flopscope_torch's hooks on at `import torch` "
                     "(on by itself when CMD is a Python program: python*, torchrun, a .py file "
                     "or a python shebang)");
  line.run->add_flag("--no-torch", line.run_options.no_torch,
                     "never turn --torch on by itself for a Python program");
  line.run->add_flag("--keep-data,!--no-keep-data", line.run_options.keep_data,
                     "with no daemon reachable, a private one records the job in "
                     "$XDG_DATA_HOME/flopscope/runs/JOB (else ~/.local/share/...), prints its "
                     "report and writes JOB.html there; --no-keep-data deletes its records at the "
                     "end (the HTML stays; default: kept, so `flopscope report JOB` reads them)");
  line.run->add_flag("--no-private-daemon", line.run_options.no_private_daemon,
                     "with no daemon reachable, start none: the job's records wait in its spool "
                     "for the node daemon (as with --socket)");
  // Listed for --help only: main() cuts the command off before CLI11 sees the arguments.
  line.run->add_option("CMD", line.run_command_for_help,
                       "the command and its arguments (after an optional --)");
}

void AddJobs(CLI::App& app, CommandLine& line) {
  line.jobs = app.add_subcommand("jobs", "List the jobs the daemon has recorded");
  AddDaemonAddress(line.jobs, line);
  line.jobs->add_option("--format", line.jobs_options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
}

void AddReport(CLI::App& app, CommandLine& line) {
  client::ReportOptions& options = line.report_options;
  line.report = app.add_subcommand("report", "Print a job's module tree, steps and phases");
  line.report->add_option("JOB", options.job_id, "job id (see: flopscope jobs)")->required();
  line.report->add_option("--rank", options.ranks, "only this rank (repeatable; default: all)")
      ->allow_extra_args(false);
  AddDaemonAddress(line.report, line);
  line.report
      ->add_option("--format", options.format,
                   "text, json or csv (DeepSpeed-style profile), html (one self-contained page "
                   "of charts, for a browser), or tree (the module tree)")
      ->check(CLI::IsMember({"text", "json", "csv", "html", "tree"}));
  line.report->add_option("-o,--output", options.output, "write to FILE instead of stdout");
  line.report
      ->add_option("--depth", options.depth,
                   "aggregated profile: depths 0 to N-1, as DeepSpeed's module_depth "
                   "(-1: all but the deepest)")
      ->check(CLI::Range(-1, 1 << 20));
  line.report->add_option("--top", options.top, "aggregated profile: top modules per depth")
      ->check(CLI::Range(1, 1 << 20));
  line.report->add_option(
      "--steps", options.steps,
      "A:B, A:, :B or A (inclusive, 0-based `step` ranges): per-step medians over those steps "
      "(default 1:, step 0 being warm-up)");
  line.report->add_option("--group", options.group,
                          "mp:K (model replica K: sums, max latency) or dp (spread across "
                          "data-parallel replicas)");
  line.report->add_option_function<double>(
      "--peak-tflops", [&options](const double& peak) { options.peak_tflops = peak; },
      "peak TFLOPS of one GPU for MFU (default: table by device name)");
  line.report->add_option("--precision", options.precision,
                          "precision MFU is measured against: fp64 fp32 tf32 bf16 fp16 fp8");
  line.report->add_option("--kernels", options.kernels_of,
                          "instead: the top GPU kernels (and memcpy/memset) of this module and "
                          "its children, demangled; / for the whole job");
  line.report
      ->add_option("--top-kernels", options.top_kernels,
                   "with --kernels: how many to list (default 10)")
      ->check(CLI::Range(1, 100000));
}

void AddRanks(CLI::App& app, CommandLine& line) {
  client::RanksOptions& options = line.ranks_options;
  line.ranks = app.add_subcommand("ranks", "One line per rank of a job");
  line.ranks->add_option("JOB", options.job_id, "job id (see: flopscope jobs)")->required();
  AddDaemonAddress(line.ranks, line);
  line.ranks->add_option("--format", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  line.ranks->add_option("--slow-pct", options.slow_pct,
                         "flag the rank the others wait for more than this many percent of "
                         "the median step-to-step period, or whose step is this many percent "
                         "above the median where nobody waits (default 5)");
  line.ranks->add_option_function<double>(
      "--peak-tflops", [&options](const double& peak) { options.peak_tflops = peak; },
      "MFU against this peak instead of the device's datasheet peak");
  line.ranks->add_option("--precision", options.precision,
                         "MFU against this precision's peak (fp64 fp32 tf32 bf16 fp16 fp8)");
  line.ranks->add_option("--steps", options.steps,
                         "A:B, A:, :B or A, as in `report --steps`: each rank's medians per step "
                         "over those steps (default 1:, step 0 being warm-up, as `report`)");
}

void AddWhere(CLI::App& app, CommandLine& line) {
  client::WhereOptions& options = line.where_options;
  line.where = app.add_subcommand(
      "where",
      "Where every rank of a running job is now: its innermost open module and for how long, "
      "ranks grouped by place, and the rank that is not where the others are (a hang)");
  line.where->add_option("JOB", options.job_id, "job id (see: flopscope jobs)")->required();
  AddDaemonAddress(line.where, line);
  line.where->add_option("--format", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
}

void AddDiff(CLI::App& app, CommandLine& line) {
  client::DiffOptions& options = line.diff_options;
  line.diff = app.add_subcommand(
      "diff", "Per module latency, FLOPs and FLOPS of job A against job B, by impact");
  line.diff->add_option("JOB_A", options.job_a, "the job before")->required();
  line.diff->add_option("JOB_B", options.job_b, "the job after")->required();
  line.diff->add_option("--rank", options.rank, "only this rank of each job (default: all)")
      ->check(CLI::NonNegativeNumber);
  line.diff->add_option(
      "--steps", options.steps,
      "A:B, A:, :B or A, as in `report --steps`: both jobs' medians per step over those steps "
      "(default 1:, step 0 being warm-up)");
  AddDaemonAddress(line.diff, line);
  line.diff->add_option("--format", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  line.diff->add_option("-o,--output", options.output, "write to FILE instead of stdout");
}

void AddProfile(CLI::App& app, CommandLine& line) {
  client::CounterWindowOptions& options = line.profile_options;
  line.profile = app.add_subcommand(
      "profile",
      "Count FLOPs with hardware counters over the next N steps of a running job's ranks; "
      "prints which ranks accepted");
  line.profile->add_option("JOB", options.job_id, "job id (see: flopscope jobs)")->required();
  line.profile->add_option("--rank", options.ranks, "only this rank (repeatable; default: all)")
      ->allow_extra_args(false)
      ->check(CLI::NonNegativeNumber);
  line.profile->add_option("--count", options.steps, "how many of the next steps to count")
      ->check(CLI::Range(1, 1000));
  // The old spelling: refused with the fix (CounterWindowCommand), never a second meaning.
  line.profile->add_option("--steps", options.old_steps, "(old spelling of --count; refused)");
  line.profile
      ->add_option("--set", options.metric_set,
                   "full (every precision and tensor source type) or cheap (fewer "
                   "replay passes); default: the process's own")
      ->check(CLI::IsMember({"full", "cheap"}));
  line.profile
      ->add_option("--timeout-ms", options.timeout_ms,
                   "how long to wait for the processes' replies (default 5000)")
      ->check(CLI::Range(1, 60000));
  AddDaemonAddress(line.profile, line);
}

int Profile(const client::CounterWindowOptions& options) {
  absl::StatusOr<int> exit_code = client::CounterWindowCommand(options, std::cout);
  if (!exit_code.ok()) {
    std::cerr << "flopscope profile: " << exit_code.status().message() << "\n";
    return client::ExitCodeFor(exit_code.status());
  }
  return *exit_code;
}

void AddCounters(CLI::App& app, CommandLine& line) {
  client::CountersOptions& options = line.counters_options;
  line.counters = app.add_subcommand(
      "counters",
      "The hardware counters counted on a chip and their cost in replay passes, from CUPTI's "
      "Profiler Host API (no GPU needed; libcupti: $FLOPSCOPE_CUPTI_PATH, else the toolkit's)");
  line.counters->add_option("--chip", options.chip,
                            "chip, as CUPTI names it (GH100; see --list-chips) or as the product "
                            "is sold (H100, H200, A100, B200, L40S, RTX 4090, ...)");
  line.counters
      ->add_option("--set", options.set, "full (default) or cheap (2 passes, no tensor FLOPs)")
      ->check(CLI::IsMember({"full", "cheap"}));
  line.counters->add_option("--format", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  line.counters->add_flag("--list-chips", options.list_chips,
                          "list the chips this CUPTI supports and which have a metric set");
}

int Counters(client::CountersOptions options) {
  options.cupti_path =
      client::Environment::FromProcess().GetNonEmpty("FLOPSCOPE_CUPTI_PATH").value_or("");
  absl::Status status = client::CountersCommand(options, std::cout);
  if (status.ok()) return 0;
  std::cerr << "flopscope counters: " << status.message() << "\n";
  return client::ExitCodeFor(status);
}

void AddExport(CLI::App& app, CommandLine& line) {
  client::ExportOptions& options = line.export_options;
  line.export_trace = app.add_subcommand(
      "export",
      "Write a job's timeline (ranges per thread, kernels per GPU stream, launch flows, step "
      "time and FLOPS counters) for ui.perfetto.dev or chrome://tracing");
  line.export_trace->add_option("JOB", options.job_id, "job id (see: flopscope jobs)")->required();
  line.export_trace
      ->add_option("--rank", options.ranks, "only this rank (repeatable; default: all)")
      ->allow_extra_args(false);
  line.export_trace->add_option("--steps", options.steps,
                                "A:B, A:, :B or A (inclusive, 0-based `step` ranges): only what "
                                "overlaps those steps (default: the whole run)");
  line.export_trace
      ->add_option("--format", options.format,
                   "perfetto (protobuf trace, default) or chrome (trace-event JSON)")
      ->check(CLI::IsMember({"perfetto", "chrome"}));
  line.export_trace->add_option("-o,--output", options.output, "the file to write")->required();
  AddDaemonAddress(line.export_trace, line);
}

void AddPrune(CLI::App& app, CommandLine& line) {
  client::PruneOptions& options = line.prune_options;
  line.prune = app.add_subcommand(
      "prune",
      "Delete finished jobs from the daemon (their files and listing): by name, or every job "
      "you own older than an age. Running jobs are never deleted");
  line.prune->add_option("JOB", options.job_ids, "job ids (see: flopscope jobs)");
  line.prune->add_option("--older-than", options.older_than,
                         "instead of names: every job you may prune whose last record is older "
                         "than AGE (e.g. 7d, 12h, 30m; units s, m, h, d, w)");
  line.prune->add_flag("--dry-run", options.dry_run,
                       "list what would be deleted and the bytes it would free; delete nothing");
  AddDaemonAddress(line.prune, line);
}

void AddImport(CLI::App& app, CommandLine& line) {
  flopscope::importer::ImportOptions& options = line.import_options;
  line.import = app.add_subcommand(
      "import",
      "Load PyTorch-profiler (Kineto) JSON traces (.json, .json.gz) or Nsight Systems SQLite "
      "exports into the daemon, one rank per file");
  line.import->add_option("FILE", options.files, "trace files")->required();
  line.import->add_option("--job", options.job, "job id (default: import-<first file's name>)");
  line.import->add_option("--rank", options.rank,
                          "rank of the first file, the next files follow (default: from each "
                          "trace's distributedInfo)");
  AddDaemonAddress(line.import, line);
  line.import->add_flag("--no-progress", line.import_no_progress, "no progress bar");
}

int Import(CommandLine& line) {
  line.import_options.progress = !line.import_no_progress;
  absl::Status status = flopscope::importer::RunImport(line.import_options, std::cout);
  if (status.ok()) return 0;
  std::cerr << "flopscope import: " << status.message() << "\n";
  return 1;
}

// `run`'s command is split off first (see run_arguments.h): CLI11 would otherwise take the
// command's own options for flopscope's. Returns the arguments left for CLI11.
std::vector<std::string> SplitOffRunCommand(const std::vector<std::string>& args,
                                            CommandLine& line) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;  // a global option
    if (args[i] != "run") break;
    client::RunArguments split = client::SplitRunArguments(args, i, {"--job", "--socket"});
    line.run_options.command = std::move(split.command);
    return split.flopscope_args;
  }
  return args;
}

// The first argument that is no global option (--help, --version): the command word, or "".
std::string CommandWord(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;
    return args[i];
  }
  return "";
}

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  return names;
}

// `flopscope help [CMD]` (what `flopscope --help` or `flopscope CMD --help` print, exit 0), or a
// command word that names no command (exit 2, named, with the nearest). nullopt when CLI11
// should parse: a known command, or no command word at all (--help, --version, nothing).
std::optional<int> AnswerHelpOrUnknown(CLI::App& app, const std::vector<std::string>& args) {
  const std::string word = CommandWord(args);
  if (word.empty()) return std::nullopt;
  const std::vector<std::string> names = CommandNames(app);
  if (word != "help") {
    if (std::find(names.begin(), names.end(), word) != names.end()) return std::nullopt;
    std::cerr << "flopscope: " << client::UnknownCommandMessage(word, names) << "\n";
    return kUsageExit;
  }
  std::vector<std::string> after_help(std::find(args.begin(), args.end(), "help"), args.end());
  const std::string topic = CommandWord(after_help);  // its [0] is "help" itself, skipped
  if (topic.empty()) {
    const bool own_help = std::find_if(after_help.begin(), after_help.end(), [](const auto& arg) {
                            return arg == "--help" || arg == "-h";
                          }) != after_help.end();
    // A command's help is given its program's name ("Usage: flopscope help ..."), as CLI11
    // gives it to `flopscope CMD --help`.
    std::cout << (own_help ? app.get_subcommand("help")->help(app.get_name()) : app.help());
    return 0;
  }
  if (std::find(names.begin(), names.end(), topic) == names.end()) {
    std::cerr << "flopscope: " << client::UnknownCommandMessage(topic, names) << "\n";
    return kUsageExit;
  }
  std::cout << app.get_subcommand(topic)->help(app.get_name());
  return 0;
}

// Prints a failed command's error; returns the exit status for `status` (0 when OK).
int Fail(const absl::Status& status) {
  if (status.ok()) return 0;
  std::cerr << "flopscope: " << status.message() << "\n";
  return client::ExitCodeFor(status);
}

// Execs the command, or runs it with a private daemon (commands/embedded_run.h); exits with
// its status without gRPC's shutdown (see main).
int Run(const client::RunOptions& options) {
  const int rc =
      client::RunCommand(options, client::Environment::FromProcess(), client::SelfExecutablePath(),
                         absl::Now(), absl::LocalTimeZone(), getpid());
  std::cout.flush();
  std::fflush(nullptr);
  _exit(rc);
}

// `report`, `ranks` and `export` of a job that `flopscope run` kept with a private daemon, when
// no --socket or --server is given and no daemon answers: a private daemon on its data, whose
// socket the command asks (nullptr: none).
std::unique_ptr<client::PrivateDaemon> ServeKeptRun(CommandLine& line) {
  if (!line.address.socket.empty() || !line.address.server.empty()) return nullptr;
  std::string* socket = nullptr;
  std::string job_id;
  bool tls = false;
  if (line.report->parsed()) {
    socket = &line.report_options.socket;
    job_id = line.report_options.job_id;
    tls = line.report_options.tls.has_value();
  } else if (line.ranks->parsed()) {
    socket = &line.ranks_options.socket;
    job_id = line.ranks_options.job_id;
    tls = line.ranks_options.tls.has_value();
  } else if (line.where->parsed()) {
    socket = &line.where_options.socket;
    job_id = line.where_options.job_id;
    tls = line.where_options.tls.has_value();
  } else if (line.export_trace->parsed()) {
    socket = &line.export_options.socket;
    job_id = line.export_options.job_id;
    tls = line.export_options.tls.has_value();
  }
  if (socket == nullptr || tls) return nullptr;
  std::unique_ptr<client::PrivateDaemon> daemon = client::ServeKeptRunIfNoDaemon(
      job_id, *socket, client::Environment::FromProcess(), client::SelfExecutablePath());
  if (daemon != nullptr) *socket = daemon->socket();
  return daemon;
}

// The commands that talk to the daemon (all but `run` and `counters`); the exit code.
int AskTheDaemon(CommandLine& line) {
  if (absl::Status s = ResolveAddress(line); !s.ok()) return Fail(s);
  const std::unique_ptr<client::PrivateDaemon> kept_run = ServeKeptRun(line);
  if (line.import->parsed()) return Import(line);
  if (line.jobs->parsed()) return Fail(client::JobsCommand(line.jobs_options));
  if (line.ranks->parsed()) return Fail(client::RanksCommand(line.ranks_options));
  if (line.where->parsed()) return Fail(client::WhereCommand(line.where_options));
  if (line.diff->parsed()) return Fail(client::DiffCommand(line.diff_options));
  if (line.profile->parsed()) return Profile(line.profile_options);
  if (line.prune->parsed()) return Fail(client::PruneCommand(line.prune_options, std::cout));
  if (line.export_trace->parsed()) {
    return Fail(client::ExportCommand(line.export_options, std::cout));
  }
  return Fail(client::ReportCommand(line.report_options));
}

}  // namespace

int main(int argc, char** argv) {
  // Named here, not from argv[0]: every usage line says "flopscope", never the path it was
  // started by ("Usage: /usr/local/bin/flopscope counters") or nothing ("Usage: counters").
  CLI::App app{"flopscope: per-module GPU profiles of training jobs, from NVTX ranges and CUPTI",
               "flopscope"};
  app.set_version_flag("--version", std::string(flopscope::kVersion));
  app.require_subcommand(1, 1);
  CommandLine line;
  AddRun(app, line);
  AddJobs(app, line);
  AddReport(app, line);
  AddImport(app, line);
  AddRanks(app, line);
  AddWhere(app, line);
  AddDiff(app, line);
  AddProfile(app, line);
  AddCounters(app, line);
  AddExport(app, line);
  AddPrune(app, line);

  // Answered before CLI11 parses (AnswerHelpOrUnknown); registered to be listed.
  app.add_subcommand("help", "List the commands, or with CMD show CMD's options: help [CMD]")
      ->add_option("CMD", line.help_topic_for_help, "the command whose options to show");
  app.footer("`flopscope help CMD` (or CMD --help) shows a command's options.");
  std::vector<std::string> args = SplitOffRunCommand({argv, argv + argc}, line);
  if (std::optional<int> answered = AnswerHelpOrUnknown(app, args)) return *answered;
  std::vector<char*> cli_argv;
  for (std::string& arg : args) cli_argv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(cli_argv.size()), cli_argv.data());
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kUsageExit;  // --help and --version exit 0
  }

  if (line.run->parsed()) return Run(line.run_options);
  if (line.counters->parsed()) return Counters(line.counters_options);
  // The other commands ask the daemon, over gRPC, which is started here and never shut down:
  // its shutdown joins its threads one by one, and where a job keeps every core busy each join
  // waits for that thread's turn on a core (docs/reliability-rerun.md, row 4). The process ends
  // instead, which ends them all at once, once what it printed is flushed. Every command has
  // closed its own files by then.
  grpc_init();
  const int rc = AskTheDaemon(line);
  std::cout.flush();
  std::fflush(nullptr);
  _exit(rc);
}
