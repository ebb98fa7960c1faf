#include "injector/cupti/counter_windows/launch_ordinals.h"

#include <algorithm>
#include <charconv>

namespace flopscope::injector::cupti {
namespace {

bool ParseOrdinal(const std::string& name, uint64_t* out) {
  if (name.empty()) return false;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), *out);
  return error == std::errc() && end == name.data() + name.size();
}

// When CUPTI names ranges by ordinal (auto range), a gap in the names means a range was lost
// between two others. Names that are not numbers say nothing either way.
// GPU-TODO: confirm the names are per-context ordinals and whether they restart at 0 after the
// counter data image is re-initialised; only consecutiveness is relied on here.
bool NamesSkip(const std::vector<std::string>& names, std::string* problem) {
  std::vector<uint64_t> ordinals;
  for (const std::string& name : names) {
    uint64_t ordinal = 0;
    if (!ParseOrdinal(name, &ordinal)) return false;
    ordinals.push_back(ordinal);
  }
  for (size_t i = 1; i < ordinals.size(); ++i) {
    if (ordinals[i] != ordinals[i - 1] + 1) {
      *problem = "counter range names skip from " + names[i - 1] + " to " + names[i] +
                 ": a launch was not seen";
      return true;
    }
  }
  return false;
}

Pairing NothingPaired(size_t launches, size_t ranges, std::string problem) {
  Pairing pairing;
  pairing.unmatched = std::max<uint64_t>(launches, ranges);
  pairing.problem = std::move(problem);
  return pairing;
}

}  // namespace

size_t LaunchOrdinals::Enter(const LaunchMark& mark, bool graph) {
  const size_t ordinal = entries_.size();
  LaunchEntry entry{mark, graph, !in_flight_.empty()};
  for (const InFlight& other : in_flight_) {
    if (other.ordinal != kEarlierPass) entries_[other.ordinal].ambiguous = true;
  }
  entries_.push_back(entry);
  in_flight_.push_back(InFlight{mark.correlation_id, ordinal});
  has_graph_ |= graph;
  return ordinal;
}

void LaunchOrdinals::Exit(uint64_t correlation_id, bool failed) {
  auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [&](const InFlight& launch) {
    return launch.correlation_id == correlation_id;
  });
  if (it == in_flight_.end()) return;
  // GPU-TODO: whether a launch that returns an error still consumed a range ordinal; until that
  // is known, its pass cannot be paired.
  if (failed && it->ordinal != kEarlierPass) Taint("a launch in the pass failed");
  in_flight_.erase(it);
}

bool LaunchOrdinals::Withdraw(uint64_t correlation_id) {
  auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [&](const InFlight& launch) {
    return launch.correlation_id == correlation_id;
  });
  if (it == in_flight_.end() || it->ordinal == kEarlierPass) return false;
  const size_t ordinal = it->ordinal;
  in_flight_.erase(it);  // its exit, when it comes, finds nothing
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(ordinal));
  for (InFlight& launch : in_flight_) {
    if (launch.ordinal != kEarlierPass && launch.ordinal > ordinal) --launch.ordinal;
  }
  has_graph_ = std::any_of(entries_.begin(), entries_.end(),
                           [](const LaunchEntry& entry) { return entry.graph; });
  return true;
}

void LaunchOrdinals::Taint(const std::string& reason) {
  if (taint_.empty()) taint_ = reason;
}

LaunchOrdinals::Pass LaunchOrdinals::Take() {
  if (!in_flight_.empty()) Taint("a launch was inside the driver when the pass ended");
  Pass pass{std::move(entries_), std::move(taint_)};
  entries_.clear();
  taint_.clear();
  has_graph_ = false;
  if (!in_flight_.empty()) {
    Taint("a launch was inside the driver when the pass began");
    for (InFlight& launch : in_flight_) launch.ordinal = kEarlierPass;
  }
  return pass;
}

void LaunchOrdinals::Resumed() {
  if (entries_.empty() && in_flight_.empty()) taint_.clear();
}

Pairing PairRanges(const LaunchOrdinals::Pass& pass, size_t ranges, size_t dropped,
                   const std::vector<std::string>& range_names) {
  const std::vector<LaunchEntry>& entries = pass.entries;
  const size_t launches = entries.size();
  if (!pass.taint.empty()) return NothingPaired(launches, ranges + dropped, pass.taint);
  if (dropped > 0) {
    return NothingPaired(launches, ranges + dropped,
                         "CUPTI dropped " + std::to_string(dropped) + " counter ranges");
  }
  std::string problem;
  if (NamesSkip(range_names, &problem)) return NothingPaired(launches, ranges, problem);
  const bool has_graph =
      std::any_of(entries.begin(), entries.end(), [](const LaunchEntry& e) { return e.graph; });
  if (has_graph) {
    // The collector gives every graph launch a pass of its own: then all its ranges are its.
    if (launches != 1) {
      return NothingPaired(launches, ranges, "a graph launch shared its pass with other launches");
    }
    if (ranges == 0) return NothingPaired(1, 0, "a graph launch made no counter range");
    Pairing pairing;
    pairing.graph_sum = true;
    return pairing;
  }
  if (ranges != launches) {
    return NothingPaired(
        launches, ranges,
        std::to_string(ranges) + " counter ranges for " + std::to_string(launches) + " launches");
  }
  Pairing pairing;
  uint64_t ambiguous = 0;
  for (size_t i = 0; i < launches; ++i) {
    if (entries[i].ambiguous) {
      ++ambiguous;
    } else {
      pairing.pairs.emplace_back(i, i);
    }
  }
  if (ambiguous > 0) {
    pairing.unmatched = ambiguous;
    pairing.problem = std::to_string(ambiguous) +
                      " launches overlapped others of their context: their order is unknown";
  }
  return pairing;
}

}  // namespace flopscope::injector::cupti
