#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flopscope::injector::cupti {

// What the launch callback knows about one launch of a counter window: everything its counters
// will be attributed with once decoded.
struct LaunchMark {
  uint64_t correlation_id = 0;
  uint64_t path_id = 0;  // innermost module range of the launching thread
  uint64_t instance_id = 0;
  uint32_t name_id = 0;  // interned CUpti_CallbackData::symbolName; 0 for graph launches
  uint32_t device_id = 0;
  uint64_t phase_path_id = 0;  // innermost flopscope-domain range of the process
  int64_t step = -1;
};

struct LaunchEntry {
  LaunchMark mark;
  bool graph = false;      // a graph launch: its kernels make any number of ranges
  bool ambiguous = false;  // overlapped another launch of the context: its order is unknown
};

// The launches of one context since its range profiler last started, in the order they entered
// the driver: the i-th is the launch ordinal i, which auto-range profiling names range i
// (cupti.md §3.1: CUPTI serialises a context's launches and numbers them from 0).
//
// Only order proves a pairing, so whatever blurs it is recorded: a launch entering while another
// of the same context is still inside the driver (between our API enter and exit callbacks) may
// get its range before or after that one, so both are marked ambiguous; a launch that failed, or
// that was in flight when the pass ended, makes the whole pass unprovable (tainted).
//
// Not thread-safe: the collector guards each context's ordinals with its mutex.
class LaunchOrdinals {
 public:
  struct Pass {
    std::vector<LaunchEntry> entries;
    std::string taint;  // why no range of this pass can be paired; "" when none
  };

  // A launch enters the driver; returns its ordinal.
  size_t Enter(const LaunchMark& mark, bool graph);
  // The launch with this correlation id left the driver; `failed` when it returned an error.
  void Exit(uint64_t correlation_id, bool failed);
  // The launch with this correlation id, still inside the driver, turned out to make no range
  // (it was captured into a graph: D7). Its ordinal goes and the later ones move down by one.
  // False when it has no ordinal in this pass.
  bool Withdraw(uint64_t correlation_id);
  // Marks the pass unprovable; the first reason is kept.
  void Taint(const std::string& reason);

  // Ends the pass: moves its entries out and starts the next one empty. Launches still inside
  // the driver may land in either pass or none, so both are tainted.
  Pass Take();
  // The next pass starts only now, after a pause (the profiler stayed stopped since Take): once
  // every launch of the earlier pass has left the driver, none can land in it, and Take's taint
  // of the next pass goes.
  void Resumed();

  size_t size() const { return entries_.size(); }
  bool has_graph() const { return has_graph_; }
  size_t in_flight() const { return in_flight_.size(); }
  const std::string& taint() const { return taint_; }

 private:
  static constexpr size_t kEarlierPass = static_cast<size_t>(-1);
  struct InFlight {
    uint64_t correlation_id;
    size_t ordinal;  // kEarlierPass when it entered before this pass began
  };

  std::vector<LaunchEntry> entries_;
  std::vector<InFlight> in_flight_;
  std::string taint_;
  bool has_graph_ = false;
};

// How the ranges of one decoded pass pair with its launches.
struct Pairing {
  std::vector<std::pair<size_t, size_t>> pairs;  // (entry, range)
  // The pass is one graph launch and every range is one of its kernels: the ranges' counters
  // add up to the graph launch's FLOPs (which range is which node is unknown).
  bool graph_sum = false;
  // Launches or ranges without a partner: for each pair that could not be made, one (so a pass
  // of N launches and R ranges that cannot be paired counts max(N, R + dropped)).
  uint64_t unmatched = 0;
  std::string problem;  // why something was not paired; "" when everything was
};

// Pairs range i with launch ordinal i only where that is provable: no taint, no dropped range,
// as many ranges as launches, range names (when they are numbers) consecutive. Otherwise nothing
// is paired and everything is unmatched: a shifted pairing would give every kernel after the
// gap the counters of another, and no sign of it in the data.
Pairing PairRanges(const LaunchOrdinals::Pass& pass, size_t ranges, size_t dropped,
                   const std::vector<std::string>& range_names);

}  // namespace flopscope::injector::cupti
