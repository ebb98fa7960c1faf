#include "client/profile_model.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flopscope::client {
namespace {

using flopscope::v1::ModuleStats;
using flopscope::v1::PhaseStats;
using flopscope::v1::Report;

constexpr char kUnattributed[] = "<unattributed>";

// What frameworks announced through the metadata channel (the last value of a key wins).
struct Announced {
  std::optional<int64_t> batch_size;
  std::string precision;
  absl::flat_hash_map<std::string, std::string> class_by_path;
  absl::flat_hash_map<std::string, double> flops_by_path;
  absl::flat_hash_map<std::string, double> macs_by_path;
};

void ReadPerPathNumber(const std::string& key, const std::string& text, const char* prefix,
                       absl::flat_hash_map<std::string, double>& into) {
  double value = 0;
  if (absl::SimpleAtod(text, &value) && value >= 0) into[key.substr(std::strlen(prefix))] = value;
}

Announced ReadMetadata(const Report& report) {
  Announced announced;
  for (const auto& entry : report.metadata()) {
    const std::string& key = entry.key();
    if (key == "batch_size") {
      int64_t value = 0;
      if (absl::SimpleAtoi(entry.value(), &value) && value > 0) announced.batch_size = value;
    } else if (key == "precision") {
      announced.precision = absl::AsciiStrToLower(entry.value());
    } else if (absl::StartsWith(key, "class ")) {
      announced.class_by_path[key.substr(6)] = entry.value();
    } else if (absl::StartsWith(key, "flops ")) {
      ReadPerPathNumber(key, entry.value(), "flops ", announced.flops_by_path);
    } else if (absl::StartsWith(key, "macs ")) {
      ReadPerPathNumber(key, entry.value(), "macs ", announced.macs_by_path);
    }
  }
  return announced;
}

const PhaseStats* FindPhase(const Report& report, const std::string& name) {
  for (const PhaseStats& phase : report.phases()) {
    if (phase.name() == name && phase.calls() > 0) return &phase;
  }
  return nullptr;
}

Figure PhaseMean(const Report& report, const std::string& name) {
  const PhaseStats* phase = FindPhase(report, name);
  if (phase == nullptr) return {std::nullopt, absl::StrCat("no '", name, "' phase marked")};
  return {static_cast<double>(phase->cpu_time_ns()) / phase->calls() / 1e9, ""};
}

// Ranks of the lowest data-parallel replica included: the daemon sums params over them.
int RanksOfFirstReplica(const Report& report) {
  if (report.ranks().empty()) return 1;
  uint32_t lowest = UINT32_MAX;
  for (const auto& rank : report.ranks()) lowest = std::min(lowest, rank.layout().dp_rank());
  int count = 0;
  for (const auto& rank : report.ranks()) count += rank.layout().dp_rank() == lowest ? 1 : 0;
  return std::max(count, 1);
}

int DistinctReplicas(const Report& report) {
  std::set<uint32_t> replicas;
  for (const auto& rank : report.ranks()) replicas.insert(rank.layout().dp_rank());
  return std::max<int>(static_cast<int>(replicas.size()), 1);
}

void FillLayout(const Report& report, Profile& profile) {
  profile.ranks = std::max(report.ranks_size(), 1);
  profile.world_size = profile.ranks;
  if (report.ranks().empty()) return;
  const auto& first = report.ranks(0);
  profile.world_size = std::max(first.world_size(), profile.ranks);
  const auto& layout = first.layout();
  profile.mp_size =
      static_cast<int>(std::max(layout.tp_size(), 1u) * std::max(layout.pp_size(), 1u));
  profile.dp_size = layout.dp_size() > 0 ? static_cast<int>(layout.dp_size())
                                         : std::max(profile.world_size / profile.mp_size, 1);
  for (const auto& rank : report.ranks()) {
    if (!rank.devices().empty() && !rank.devices(0).name().empty()) {
      profile.device = rank.devices(0).name();
      break;
    }
  }
}

ModuleRow RowFor(const ModuleStats& module, const Announced& announced, double divisor,
                 int params_divisor) {
  ModuleRow row;
  row.path = module.path();
  row.name = module.name();
  row.depth = module.depth();
  auto named = announced.class_by_path.find(module.path());
  row.class_name =
      named != announced.class_by_path.end() ? named->second : ClassFromName(module.name());
  if (module.has_params()) row.params = static_cast<double>(module.params()) / params_divisor;
  if (module.has_flops()) {
    row.flops = module.flops() / divisor;
  } else if (auto flops = announced.flops_by_path.find(module.path());
             flops != announced.flops_by_path.end()) {
    row.flops = flops->second;
    row.flops_announced = true;
  }
  if (auto macs = announced.macs_by_path.find(module.path());
      macs != announced.macs_by_path.end()) {
    row.macs = macs->second;
  } else if (row.flops) {
    row.macs = *row.flops / 2;
  }
  row.latency_is_gpu = module.has_gpu_time_ns();
  const double time_ns =
      static_cast<double>(module.has_gpu_time_ns() ? module.gpu_time_ns() : module.cpu_time_ns());
  row.latency_s = time_ns / divisor / 1e9;
  row.kernels = module.kernels();
  return row;
}

// Sums a figure over the top-level modules; nullopt when none of them has it.
template <typename Getter>
std::optional<double> SumOverRoots(const std::vector<ModuleRow>& modules, Getter get) {
  std::optional<double> sum;
  for (const ModuleRow& row : modules) {
    if (row.depth != 0 || row.path == kUnattributed) continue;
    if (std::optional<double> value = get(row)) sum = sum.value_or(0) + *value;
  }
  return sum;
}

void FillSummaryFigures(const Report& report, Profile& profile) {
  const int replica_ranks = RanksOfFirstReplica(report);
  const bool whole_replicas = replica_ranks == profile.mp_size &&
                              profile.ranks == DistinctReplicas(report) * profile.mp_size;
  profile.params_per_gpu.value =
      SumOverRoots(profile.modules, [](const ModuleRow& row) { return row.params; });
  if (!profile.params_per_gpu.value) profile.params_per_gpu.note = "no params announced";
  profile.fwd_flops_per_gpu.value =
      SumOverRoots(profile.modules, [](const ModuleRow& row) { return row.flops; });
  if (!profile.fwd_flops_per_gpu.value) profile.fwd_flops_per_gpu.note = profile.flops_source;
  profile.fwd_macs_per_gpu.value =
      SumOverRoots(profile.modules, [](const ModuleRow& row) { return row.macs; });
  if (!profile.fwd_macs_per_gpu.value) profile.fwd_macs_per_gpu.note = profile.flops_source;

  const char* model_note =
      whole_replicas || profile.mp_size == 1 ? "" : "estimate: per GPU x mp_size, as DeepSpeed";
  profile.params_of_model = profile.params_per_gpu;
  profile.fwd_flops_of_model = profile.fwd_flops_per_gpu;
  for (Figure* model : {&profile.params_of_model, &profile.fwd_flops_of_model}) {
    if (model->value) {
      *model->value *= profile.mp_size;
      model->note = model_note;
    }
  }

  profile.fwd_latency_s = PhaseMean(report, "forward");
  if (!profile.fwd_latency_s.value) {
    std::optional<double> roots =
        SumOverRoots(profile.modules, [](const ModuleRow& row) { return row.latency_s; });
    if (roots) profile.fwd_latency_s = {roots, "top-level modules (no 'forward' phase marked)"};
  }
  profile.bwd_latency_s = PhaseMean(report, "backward");
  profile.step_latency_s = PhaseMean(report, "optimizer");
  profile.iter_latency_s = PhaseMean(report, "step");
  if (!profile.iter_latency_s.value && profile.fwd_latency_s.value && profile.bwd_latency_s.value) {
    profile.iter_latency_s = {*profile.fwd_latency_s.value + *profile.bwd_latency_s.value +
                                  profile.step_latency_s.value.value_or(0),
                              "fwd + bwd + step (no 'step' range marked)"};
  }
}

std::string FlopsSource(const std::vector<ModuleRow>& modules, const Report& report) {
  bool counted = false;
  bool announced = false;
  for (const ModuleRow& row : modules) {
    counted |= row.flops.has_value() && !row.flops_announced;
    announced |= row.flops_announced;
  }
  if (counted) return announced ? "counted (announced where not counted)" : "counted";
  if (announced) return "announced by the framework (not measured)";
  const bool gpu = std::any_of(report.ranks().begin(), report.ranks().end(),
                               [](const auto& rank) { return rank.kernels() > 0; });
  return gpu ? "no FLOPs counted (no counter window)" : "no FLOPs: no GPU records";
}

}  // namespace

std::string ClassFromName(const std::string& name) {
  const size_t dot = name.find_last_of("._");
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
}

absl::StatusOr<ProfileOptions> ParseProfileOptions(const std::optional<double>& peak_tflops,
                                                   const std::string& precision) {
  ProfileOptions profile;
  if (peak_tflops) {
    if (*peak_tflops <= 0) return absl::InvalidArgumentError("--peak-tflops must be above 0");
    profile.peak_tflops = peak_tflops;
  }
  if (!precision.empty()) {
    profile.precision = ParsePrecision(precision);
    if (!profile.precision) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--precision '", precision, "' is not known (fp64 fp32 tf32 bf16 fp16 fp8)"));
    }
  }
  return profile;
}

void DeriveRates(const ProfileOptions& options, Profile& profile) {
  const std::optional<double> fwd_flops = profile.fwd_flops_per_gpu.value;
  const std::optional<double> fwd = profile.fwd_latency_s.value;
  const std::optional<double> bwd = profile.bwd_latency_s.value;
  auto rate = [](std::optional<double> flops, std::optional<double> seconds,
                 const std::string& missing) -> Figure {
    if (!flops) return {std::nullopt, missing};
    if (!seconds || *seconds <= 0) return {std::nullopt, "latency unknown"};
    return {*flops / *seconds, ""};
  };
  const std::string no_flops = profile.fwd_flops_per_gpu.note;
  profile.fwd_flops_per_s = rate(fwd_flops, fwd, no_flops);
  profile.bwd_flops_per_s =
      rate(fwd_flops ? std::optional<double>(2 * *fwd_flops) : std::nullopt, bwd, no_flops);
  if (profile.bwd_flops_per_s.value) {
    profile.bwd_flops_per_s.note = "estimate: bwd flops = 2 x fwd flops, as DeepSpeed";
  }
  profile.fwd_bwd_flops_per_s =
      rate(fwd_flops ? std::optional<double>(3 * *fwd_flops) : std::nullopt,
           fwd && bwd ? std::optional<double>(*fwd + *bwd) : std::nullopt, no_flops);
  if (profile.fwd_bwd_flops_per_s.value) {
    profile.fwd_bwd_flops_per_s.note = "estimate: bwd flops = 2 x fwd flops";
  }

  const std::optional<double> iter = profile.iter_latency_s.value;
  if (!profile.batch_size) {
    profile.samples_per_s = {std::nullopt, "batch size not announced (batch_size=<n>)"};
  } else if (!iter || *iter <= 0) {
    profile.samples_per_s = {std::nullopt, "iter latency unknown"};
  } else {
    profile.samples_per_s = {static_cast<double>(*profile.batch_size) * profile.dp_size / *iter,
                             ""};
  }

  Precision precision = Precision::kBf16;
  std::string precision_note = "assumed bf16 (announce precision=<p> or pass --precision)";
  if (options.precision) {
    precision = *options.precision;
    precision_note = "";
  } else if (std::optional<Precision> announced = ParsePrecision(profile.precision)) {
    precision = *announced;
    precision_note = "";
  }
  profile.precision = PrecisionName(precision);
  std::optional<double> peak = options.peak_tflops;
  std::string peak_problem;
  if (!peak) {
    PeakLookup lookup = LookUpPeak(profile.device, precision);
    peak = lookup.tflops;
    peak_problem = lookup.problem;
  }
  const Figure& achieved = profile.fwd_bwd_flops_per_s;
  if (!peak || *peak <= 0) {
    profile.mfu = {std::nullopt, peak_problem.empty() ? "peak unknown" : peak_problem};
  } else if (!achieved.value) {
    profile.mfu = {std::nullopt, achieved.note};
  } else {
    profile.mfu = {*achieved.value / (*peak * 1e12),
                   absl::StrCat("against ", *peak, " TFLOPS ", profile.precision,
                                precision_note.empty() ? "" : ", ", precision_note)};
  }
}

Profile BuildProfile(const Report& report, const ProfileOptions& options,
                     bool model_figures_measured) {
  Profile profile;
  profile.job_id = report.job_id();
  FillLayout(report, profile);
  profile.scope = report.ranks_size() == 1
                      ? absl::StrCat("rank ", report.ranks(0).rank())
                      : absl::StrCat(profile.ranks, " ranks, figures per GPU are means");
  const Announced announced = ReadMetadata(report);
  profile.batch_size = announced.batch_size;
  profile.precision = announced.precision;
  const PhaseStats* step = FindPhase(report, "step");
  profile.steps = step == nullptr ? 0 : step->calls() / profile.ranks;
  const double divisor = static_cast<double>(profile.ranks) * std::max<uint64_t>(profile.steps, 1);
  const int params_divisor = RanksOfFirstReplica(report);
  for (const ModuleStats& module : report.modules()) {
    profile.modules.push_back(RowFor(module, announced, divisor, params_divisor));
  }
  profile.flops_source = FlopsSource(profile.modules, report);
  FillSummaryFigures(report, profile);
  if (model_figures_measured) {
    profile.params_of_model.note.clear();
    profile.fwd_flops_of_model.note.clear();
  }
  DeriveRates(options, profile);
  return profile;
}

}  // namespace flopscope::client
