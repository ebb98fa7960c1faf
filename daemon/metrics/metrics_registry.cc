#include "daemon/metrics/metrics_registry.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace flopscope::daemon::metrics {
namespace {

constexpr char kGpuNameKey[] = "gpu.0.name";
constexpr char kGpuUuidKey[] = "gpu.0.uuid";

// "LOSS_CAUSE_BUFFER_FULL" -> "buffer_full".
std::string CauseLabel(int cause) {
  const std::string name = v1::LossCause_Name(static_cast<v1::LossCause>(cause));
  return absl::AsciiStrToLower(absl::StripPrefix(name, "LOSS_CAUSE_"));
}

using prometheus::MetricFamily;
using prometheus::MetricType;

Labels With(const Labels& labels, std::string name, std::string value) {
  Labels extended = labels;
  extended.push_back({std::move(name), std::move(value)});
  return extended;
}

// One family of one sample per rank: `get` gives the value, or nullopt to leave the rank out.
template <typename Get>
void PerRank(const std::vector<RankSnapshot>& ranks, const char* name, MetricType type,
             const char* help, Get get, std::vector<MetricFamily>* out) {
  MetricFamily& family = out->emplace_back(Family(name, type, help));
  for (const RankSnapshot& rank : ranks) {
    if (const std::optional<double> value = get(rank)) AddSample(&family, rank.labels, *value);
  }
}

}  // namespace

MetricsRegistry::MetricsRegistry(size_t max_ranks, std::function<int64_t()> now_ns)
    : max_ranks_(std::max<size_t>(max_ranks, 1)),
      now_ns_(now_ns ? std::move(now_ns) : [] { return absl::GetCurrentTimeNanos(); }) {}

MetricsRegistry::RankEntry& MetricsRegistry::Touch(const v1::SessionHello& hello) {
  RankKey key{hello.job_id(), hello.rank()};
  auto found = ranks_.find(key);
  if (found == ranks_.end()) {
    if (ranks_.size() >= max_ranks_) EvictOne();
    found = ranks_.emplace(std::move(key), RankEntry{}).first;
  }
  RankEntry& entry = found->second;
  entry.touched = ++ticks_;
  entry.counters.host = hello.host();
  if (hello.devices_size() > 0) {
    const v1::Device& device = hello.devices(0);
    entry.counters.gpu = std::to_string(device.index());
    if (!device.uuid().empty()) entry.counters.uuid = device.uuid();
    if (!device.name().empty()) entry.activity.SetDeviceName(device.name());
  }
  return entry;
}

void MetricsRegistry::EvictOne() {
  // The least recently updated rank, a disconnected one if there is any.
  auto victim = ranks_.end();
  for (auto it = ranks_.begin(); it != ranks_.end(); ++it) {
    if (victim == ranks_.end()) {
      victim = it;
      continue;
    }
    const bool idle = it->second.counters.connected == 0;
    const bool victim_idle = victim->second.counters.connected == 0;
    if (idle != victim_idle ? idle : it->second.touched < victim->second.touched) victim = it;
  }
  if (victim == ranks_.end()) return;
  ranks_.erase(victim);
  ++evicted_;
}

void MetricsRegistry::OnConnected(const v1::SessionHello& hello) {
  absl::MutexLock lock(&mu_);
  ++Touch(hello).counters.connected;
  ++connected_;
}

void MetricsRegistry::OnDisconnected(const v1::SessionHello& hello) {
  absl::MutexLock lock(&mu_);
  --connected_;
  auto found = ranks_.find(RankKey{hello.job_id(), hello.rank()});
  if (found != ranks_.end() && found->second.counters.connected > 0) {
    --found->second.counters.connected;
  }
}

void MetricsRegistry::TakeDeviceFacts(const v1::Batch& batch, RankEntry* entry) {
  // The injector learns its device after the hello when the job initialises CUDA later.
  for (const v1::Metadata& mark : batch.metadata()) {
    if (mark.key() == kGpuNameKey) {
      entry->activity.SetDeviceName(mark.value());
    } else if (mark.key() == kGpuUuidKey) {
      entry->counters.uuid = mark.value();
    } else {
      continue;
    }
    if (entry->counters.gpu.empty()) entry->counters.gpu = "0";
  }
}

void MetricsRegistry::TakeOpenRanges(const v1::Batch& batch, RankCounters* counters) {
  // A rank's sessions each send their own; the newest snapshot stands for the rank.
  if (!batch.has_open_ranges() || batch.open_ranges().time_ns() < counters->open_snapshot_ns) {
    return;
  }
  counters->open_snapshot_ns = batch.open_ranges().time_ns();
  std::optional<int64_t> oldest;
  for (const v1::ThreadOpenRanges& thread : batch.open_ranges().threads()) {
    // Outermost first: a stack's first range is its oldest.
    for (const auto* stack : {&thread.modules(), &thread.phases()}) {
      if (stack->empty()) continue;
      const int64_t start = stack->Get(0).start_ns();
      if (!oldest || start < *oldest) oldest = start;
    }
  }
  counters->oldest_open_start_ns = oldest;
}

void MetricsRegistry::OnCommitted(const v1::SessionHello& hello, const v1::Batch& batch,
                                  const RankTotals& totals) {
  absl::MutexLock lock(&mu_);
  RankEntry& entry = Touch(hello);
  RankCounters& counters = entry.counters;
  ++counters.batches;
  counters.ranges += static_cast<uint64_t>(batch.ranges_size());
  counters.activities += static_cast<uint64_t>(batch.kernels_size());
  counters.kernel_flops += static_cast<uint64_t>(batch.kernel_flops_size());
  counters.metadata += static_cast<uint64_t>(batch.metadata_size());
  counters.losses = totals.losses;
  TakeDeviceFacts(batch, &entry);
  TakeOpenRanges(batch, &counters);
  entry.activity.Observe(hello.session_id(), batch);
}

void MetricsRegistry::OnRejected(const v1::SessionHello& hello, std::string_view rule,
                                 uint64_t records) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, uint64_t>& rejected = Touch(hello).counters.rejected;
  std::string key(rule);
  if (!rejected.contains(key) && rejected.size() >= kMaxRejectionRules - 1) key = "other";
  rejected[key] += records;
}

std::vector<RankSnapshot> MetricsRegistry::TakeSnapshots() const {
  const int64_t now_ns = now_ns_();
  absl::MutexLock lock(&mu_);
  std::vector<RankSnapshot> snapshots;
  snapshots.reserve(ranks_.size());
  for (const auto& [key, entry] : ranks_) {
    Labels labels{{"hostname", entry.counters.host},
                  {"gpu", entry.counters.gpu},
                  {"UUID", entry.counters.uuid},
                  {"job", key.job},
                  {"rank", std::to_string(key.rank)}};
    std::optional<double> oldest_open_seconds;
    if (entry.counters.connected > 0 && entry.counters.oldest_open_start_ns) {
      oldest_open_seconds = std::max<double>(
          0, static_cast<double>(now_ns - *entry.counters.oldest_open_start_ns) / 1e9);
    }
    snapshots.push_back(RankSnapshot{key.job, key.rank, std::move(labels), entry.counters,
                                     entry.activity.Figures(), oldest_open_seconds});
  }
  std::sort(snapshots.begin(), snapshots.end(), [](const RankSnapshot& a, const RankSnapshot& b) {
    return std::tie(a.job, a.rank) < std::tie(b.job, b.rank);
  });
  return snapshots;
}

namespace {

std::optional<double> Count(uint64_t value) { return static_cast<double>(value); }

void WriteProgress(const std::vector<RankSnapshot>& ranks, std::vector<MetricFamily>* out) {
  PerRank(
      ranks, "flopscope_rank_connected", MetricType::Gauge,
      "Open collector streams of the rank (0 once its processes ended).",
      [](const RankSnapshot& r) { return Count(static_cast<uint64_t>(r.counters.connected)); },
      out);
  PerRank(
      ranks, "flopscope_rank_batches_total", MetricType::Counter,
      "Batches of the rank the daemon committed (duplicates not counted).",
      [](const RankSnapshot& r) { return Count(r.counters.batches); }, out);
  PerRank(
      ranks, "flopscope_rank_steps_total", MetricType::Counter,
      "`step` ranges of the flopscope NVTX domain ingested, counted steps included.",
      [](const RankSnapshot& r) { return Count(r.figures.steps); }, out);
  PerRank(
      ranks, "flopscope_rank_step_seconds", MetricType::Gauge,
      "Duration of the rank's latest step outside counter windows, push to pop.",
      [](const RankSnapshot& r) { return r.figures.step_seconds; }, out);
  PerRank(
      ranks, "flopscope_rank_step_flops", MetricType::Gauge,
      "FLOPs hardware-counted in the rank's latest counted step, every precision.",
      [](const RankSnapshot& r) { return r.figures.step_flops; }, out);
  PerRank(
      ranks, "flopscope_rank_achieved_flops_per_second", MetricType::Gauge,
      "FLOPs of the latest counted step over the latest uncounted step's duration.",
      [](const RankSnapshot& r) { return r.figures.achieved_flops_per_s; }, out);
  PerRank(
      ranks, "flopscope_rank_mfu_ratio", MetricType::Gauge,
      "Achieved FLOPS over the device's dense peak for the step's dominant precision.",
      [](const RankSnapshot& r) { return r.figures.mfu; }, out);
  PerRank(
      ranks, "flopscope_rank_oldest_open_range_seconds", MetricType::Gauge,
      "Age of the rank's oldest open NVTX range at the scrape, from its latest snapshot "
      "(flopscope where); only for connected ranks with a range open. A hang keeps it growing.",
      [](const RankSnapshot& r) { return r.oldest_open_seconds; }, out);
}

void WriteIngested(const std::vector<RankSnapshot>& ranks, std::vector<MetricFamily>* out) {
  MetricFamily& family = out->emplace_back(
      Family("flopscope_rank_records_ingested_total", MetricType::Counter,
             "Records of the rank committed, by kind: range events, GPU activities (kernels, "
             "memcpy, memset), counted kernel FLOPs, metadata marks."));
  for (const RankSnapshot& r : ranks) {
    const RankCounters& c = r.counters;
    AddSample(&family, With(r.labels, "kind", "range"), static_cast<double>(c.ranges));
    AddSample(&family, With(r.labels, "kind", "activity"), static_cast<double>(c.activities));
    AddSample(&family, With(r.labels, "kind", "kernel_flops"), static_cast<double>(c.kernel_flops));
    AddSample(&family, With(r.labels, "kind", "metadata"), static_cast<double>(c.metadata));
  }
}

void WriteLosses(const std::vector<RankSnapshot>& ranks, std::vector<MetricFamily>* out) {
  MetricFamily& lost = out->emplace_back(
      Family("flopscope_rank_records_lost_total", MetricType::Counter,
             "Records the rank's processes reported lost, by cause (summed over sessions)."));
  for (const RankSnapshot& r : ranks) {
    for (int cause = v1::LossCause_MIN + 1; cause <= v1::LossCause_MAX; ++cause) {
      if (!v1::LossCause_IsValid(cause)) continue;
      const auto found = r.counters.losses.find(cause);
      const uint64_t records = found == r.counters.losses.end() ? 0 : found->second;
      AddSample(&lost, With(r.labels, "cause", CauseLabel(cause)), static_cast<double>(records));
    }
  }
  MetricFamily& rejected = out->emplace_back(
      Family("flopscope_rank_records_rejected_total", MetricType::Counter,
             "Records in batches of the rank the daemon rejected, by the rule they broke."));
  for (const RankSnapshot& r : ranks) {
    for (const auto& [rule, records] : r.counters.rejected) {
      AddSample(&rejected, With(r.labels, "rule", rule), static_cast<double>(records));
    }
  }
}

// A daemon-wide family: one sample without labels.
void Daemonwide(const char* name, MetricType type, const char* help, double value,
                std::vector<MetricFamily>* out) {
  AddSample(&out->emplace_back(Family(name, type, help)), {}, value);
}

}  // namespace

void MetricsRegistry::OnJobPruned(uint64_t bytes) {
  absl::MutexLock lock(&mu_);  // guards the prune counters
  ++jobs_pruned_;
  bytes_pruned_ += bytes;
}

std::vector<MetricFamily> MetricsRegistry::Collect() const {
  const std::vector<RankSnapshot> ranks = TakeSnapshots();
  std::vector<MetricFamily> out;
  WriteProgress(ranks, &out);
  WriteIngested(ranks, &out);
  WriteLosses(ranks, &out);
  int connected = 0;
  uint64_t evicted = 0, jobs_pruned = 0, bytes_pruned = 0;
  {
    absl::MutexLock lock(&mu_);
    connected = connected_;
    evicted = evicted_;
    jobs_pruned = jobs_pruned_;
    bytes_pruned = bytes_pruned_;
  }
  Daemonwide("flopscope_daemon_streams_connected", MetricType::Gauge,
             "Open collector streams, all jobs.", connected, &out);
  Daemonwide("flopscope_daemon_ranks_tracked", MetricType::Gauge,
             "Ranks with series on this endpoint (at most --metrics-max-ranks).",
             static_cast<double>(ranks.size()), &out);
  Daemonwide("flopscope_daemon_ranks_evicted_total", MetricType::Counter,
             "Ranks whose series were dropped to stay within --metrics-max-ranks.",
             static_cast<double>(evicted), &out);
  Daemonwide("flopscope_daemon_jobs_pruned_total", MetricType::Counter,
             "Whole jobs deleted: flopscope prune and the --max-disk budget.",
             static_cast<double>(jobs_pruned), &out);
  Daemonwide("flopscope_daemon_pruned_bytes_total", MetricType::Counter,
             "Bytes of the files of the jobs deleted.", static_cast<double>(bytes_pruned), &out);
  return out;
}

std::string MetricsRegistry::Render() const { return Serialize(Collect()); }

}  // namespace flopscope::daemon::metrics
