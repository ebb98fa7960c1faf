#include "injector/records/identity.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <optional>

#include "common/job_id.h"
#include "common/utf8.h"

namespace flopscope::injector {
namespace {

constexpr size_t kMaxCommandBytes = 4096;

std::optional<int64_t> ParseInteger(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > INT32_MAX) return std::nullopt;
  return value;
}

// The first of `names` that is set and holds a non-negative integer; a set but malformed value is
// reported and skipped so that a later variable can still answer.
std::optional<int64_t> FirstInteger(const EnvLookup& env, std::initializer_list<const char*> names,
                                    std::vector<std::string>* warnings) {
  for (const char* name : names) {
    const char* text = env(name);
    if (text == nullptr || *text == '\0') continue;
    if (auto value = ParseInteger(text)) return value;
    warnings->push_back(std::string("ignoring ") + name + "='" + text +
                        "': not a non-negative integer");
  }
  return std::nullopt;
}

std::string JobIdFrom(const EnvLookup& env, const HostFacts& facts) {
  for (const char* name : {"FLOPSCOPE_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    const char* text = env(name);
    if (text != nullptr && *text != '\0') return SanitizeJobId(text);
  }
  const int64_t start_seconds = facts.start_time_ns / 1000000000;
  return SanitizeJobId(facts.host + "-" + std::to_string(facts.pid) + "-" +
                       std::to_string(start_seconds));
}

ParallelLayout LayoutFrom(const EnvLookup& env, int32_t rank, int32_t world_size,
                          std::vector<std::string>* warnings) {
  const auto tp = FirstInteger(env, {"FLOPSCOPE_TP_SIZE"}, warnings);
  const auto pp = FirstInteger(env, {"FLOPSCOPE_PP_SIZE"}, warnings);
  ParallelLayout layout;
  layout.dp_size = static_cast<uint32_t>(world_size);
  layout.dp_rank = static_cast<uint32_t>(rank);
  if (!tp && !pp) return layout;
  const int64_t tp_size = tp.value_or(1);
  const int64_t pp_size = pp.value_or(1);
  const int64_t model_parallel = tp_size * pp_size;
  if (model_parallel == 0 || world_size % model_parallel != 0) {
    warnings->push_back("ignoring FLOPSCOPE_TP_SIZE=" + std::to_string(tp_size) +
                        " FLOPSCOPE_PP_SIZE=" + std::to_string(pp_size) +
                        ": tp * pp must divide WORLD_SIZE=" + std::to_string(world_size));
    return layout;
  }
  layout.tp_size = static_cast<uint32_t>(tp_size);
  layout.pp_size = static_cast<uint32_t>(pp_size);
  layout.dp_size = static_cast<uint32_t>(world_size / model_parallel);
  layout.tp_rank = static_cast<uint32_t>(rank % tp_size);
  layout.pp_rank = static_cast<uint32_t>((rank / tp_size) % pp_size);
  layout.dp_rank = static_cast<uint32_t>(rank / model_parallel);
  layout.source = "env";
  return layout;
}

std::string ReadCommandLine() {
  FILE* file = std::fopen("/proc/self/cmdline", "rb");
  if (file == nullptr) return "";
  std::string raw(kMaxCommandBytes, '\0');
  const size_t got = std::fread(raw.data(), 1, raw.size(), file);
  std::fclose(file);
  raw.resize(got);
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  std::string command;
  AppendSanitizedUtf8(raw, &command);
  return command;
}

}  // namespace

SessionIdentity IdentityFromEnvironment(const EnvLookup& env, const HostFacts& facts) {
  SessionIdentity id;
  id.host = facts.host;
  id.pid = facts.pid;
  id.start_time_ns = facts.start_time_ns;
  id.command = facts.command;
  id.session_id =
      facts.host + "-" + std::to_string(facts.pid) + "-" + std::to_string(facts.start_time_ns);
  id.job_id = JobIdFrom(env, facts);
  id.world_size = static_cast<int32_t>(
      FirstInteger(env, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"},
                   &id.warnings)
          .value_or(1));
  if (id.world_size < 1) {
    id.warnings.push_back("ignoring a world size of 0: using 1");
    id.world_size = 1;
  }
  id.rank = static_cast<int32_t>(
      FirstInteger(env, {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, &id.warnings)
          .value_or(0));
  if (id.rank >= id.world_size) {
    id.warnings.push_back("rank " + std::to_string(id.rank) +
                          " is not below WORLD_SIZE=" + std::to_string(id.world_size) +
                          ": using world size " + std::to_string(id.rank + 1));
    id.world_size = id.rank + 1;
  }
  id.local_rank = static_cast<int32_t>(
      FirstInteger(env, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, &id.warnings)
          .value_or(0));
  id.layout = LayoutFrom(env, id.rank, id.world_size, &id.warnings);
  return id;
}

HostFacts CollectHostFacts() {
  HostFacts facts;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    facts.host = "unknown-host";
  } else {
    AppendSanitizedUtf8(host, &facts.host);
  }
  facts.pid = getpid();
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  facts.start_time_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  facts.command = ReadCommandLine();
  return facts;
}

}  // namespace flopscope::injector
