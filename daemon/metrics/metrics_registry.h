#pragma once

// The figures flopscoped serves on /metrics (`--metrics HOST:PORT`), kept current by the
// Collector as it commits batches, so that a scrape formats what is in memory and reads no rank
// file: its cost is O(ranks tracked x series per rank), about 1.4 µs a series (1024 ranks:
// 34 ms, 3.3 MB on the 2-core development VM).
//
// Series (docs/architecture.md, "Monitoring"), labelled like dcgm-exporter's plus the job:
// hostname, gpu (the rank's first CUDA device ordinal, "" without one), UUID, job, rank.
// Per rank at most kMaxSeriesPerRank series; at most max_ranks ranks (the least recently
// updated, preferably disconnected, is dropped first and counted), so a scrape is bounded
// whatever the producers send. No per-module series.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics/exposition.h"
#include "daemon/metrics/rank_activity.h"
#include "daemon/store/rank_totals.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon::metrics {

inline constexpr size_t kDefaultMaxRanks = 1024;
// Distinct rejection rules kept per rank; more are added up under "other".
inline constexpr size_t kMaxRejectionRules = 8;
// connected, batches, steps, step seconds, step FLOPs, achieved FLOPS, MFU, oldest open range (8),
// records ingested by kind (4), lost by cause (one per LossCause but UNSPECIFIED: 15 today),
// rejected by rule (kMaxRejectionRules): 35 today.
inline constexpr size_t kMaxSeriesPerRank =
    8 + 4 + static_cast<size_t>(v1::LossCause_MAX) + kMaxRejectionRules;

// What a scrape copies of one rank (everything but its RankActivity, whose figures it takes).
struct RankCounters {
  std::string host, gpu, uuid;
  int connected = 0;  // open streams
  uint64_t batches = 0;
  uint64_t ranges = 0, activities = 0, kernel_flops = 0, metadata = 0;
  std::map<int, uint64_t> losses;            // LossCause -> records, as the store sums them
  std::map<std::string, uint64_t> rejected;  // rule -> records
  // The latest snapshot of open ranges (Batch.open_ranges): when it was taken, and the start of
  // the oldest range open in it (nullopt: nothing open, or no snapshot yet).
  int64_t open_snapshot_ns = INT64_MIN;
  std::optional<int64_t> oldest_open_start_ns;
};

struct RankSnapshot {
  std::string job;
  int32_t rank = 0;
  Labels labels;
  RankCounters counters;
  RankFigures figures;
  // Seconds the oldest open range has been open at the scrape, for a rank still connected with
  // something open (`flopscope where`: an alert on a hang).
  std::optional<double> oldest_open_seconds;
};

// Thread-safe: every call takes one mutex, held for O(records of the batch) in OnCommitted
// and for a copy of the figures in Collect (the families are built outside it). A
// prometheus::Collectable: its families are built from the figures when scraped (exposition.h).
class MetricsRegistry : public prometheus::Collectable {
 public:
  // `now_ns`: the clock open ranges are aged by at a scrape (Unix-epoch ns); null: the real one.
  explicit MetricsRegistry(size_t max_ranks = kDefaultMaxRanks,
                           std::function<int64_t()> now_ns = nullptr);

  // A producer's stream was accepted / ended.
  void OnConnected(const v1::SessionHello& hello) ABSL_LOCKS_EXCLUDED(mu_);
  void OnDisconnected(const v1::SessionHello& hello) ABSL_LOCKS_EXCLUDED(mu_);
  // A validated batch was committed (not a duplicate); `totals` are the rank's after it.
  void OnCommitted(const v1::SessionHello& hello, const v1::Batch& batch, const RankTotals& totals)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The daemon rejected a batch of `records` records under `rule` (RejectedRule).
  void OnRejected(const v1::SessionHello& hello, std::string_view rule, uint64_t records)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A whole job of `bytes` bytes was deleted (flopscope prune, --max-disk:
  // daemon/retention/job_pruner.h).
  void OnJobPruned(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // The families of everything tracked, in the order they are served.
  std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_);
  // Their exposition text (format 0.0.4).
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct RankKey {
    std::string job;
    int32_t rank = 0;
    bool operator==(const RankKey& other) const { return rank == other.rank && job == other.job; }
    template <typename H>
    friend H AbslHashValue(H h, const RankKey& key) {
      return H::combine(std::move(h), key.job, key.rank);
    }
  };
  struct RankEntry {
    RankCounters counters;
    RankActivity activity;
    uint64_t touched = 0;  // ticks_ when last updated
  };
  // The hello's rank, created (evicting if needed) when new; its labels refreshed.
  RankEntry& Touch(const v1::SessionHello& hello) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictOne() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void TakeDeviceFacts(const v1::Batch& batch, RankEntry* entry);
  static void TakeOpenRanges(const v1::Batch& batch, RankCounters* counters);
  std::vector<RankSnapshot> TakeSnapshots() const ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_ranks_;
  const std::function<int64_t()> now_ns_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RankKey, RankEntry> ranks_ ABSL_GUARDED_BY(mu_);
  uint64_t ticks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  int connected_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t jobs_pruned_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_pruned_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace flopscope::daemon::metrics
