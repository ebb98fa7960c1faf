// Per-window medians of the estimate marks (see estimate_window.h).
#include "daemon/report/estimate_window.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace flopscope::daemon {
namespace {

constexpr const char* kEstimatePrefixes[] = {"estimated_flops ", "estimated_macs "};

bool IsEstimate(const std::string& key) {
  for (const char* prefix : kEstimatePrefixes) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

// Marks of one key by time (arrival order among equal times).
using Announcements = std::vector<std::pair<int64_t, double>>;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// The figure in effect at each step end, where one is.
std::vector<double> InEffect(const Announcements& marks, const std::vector<int64_t>& step_ends) {
  std::vector<double> values;
  for (int64_t end : step_ends) {
    auto after = std::upper_bound(marks.begin(), marks.end(), end,
                                  [](int64_t time, const auto& mark) { return time < mark.first; });
    if (after != marks.begin()) values.push_back(std::prev(after)->second);
  }
  return values;
}

// The shortest text that reads back as the same double (integers print without an exponent).
std::string NumberText(double value) {
  char text[64];
  const auto end = value == static_cast<double>(static_cast<int64_t>(value)) && value < 9e15
                       ? std::to_chars(text, text + sizeof text, static_cast<int64_t>(value))
                       : std::to_chars(text, text + sizeof text, value);
  return std::string(text, end.ptr);
}

}  // namespace

void WindowEstimates(const std::vector<int64_t>& window_step_ends_ns,
                     std::vector<v1::Metadata>* metadata) {
  if (window_step_ends_ns.empty()) return;
  std::map<std::string, Announcements> by_key;  // sorted keys: a stable order of the new marks
  std::vector<v1::Metadata> kept;
  kept.reserve(metadata->size());
  for (v1::Metadata& entry : *metadata) {
    double value = 0;
    if (!IsEstimate(entry.key())) {
      kept.push_back(std::move(entry));
    } else if (absl::SimpleAtod(entry.value(), &value)) {
      by_key[entry.key()].emplace_back(entry.time_ns(), value);
    }
  }
  const int64_t last_end = window_step_ends_ns.back();
  for (auto& [key, marks] : by_key) {
    std::stable_sort(marks.begin(), marks.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::vector<double> values = InEffect(marks, window_step_ends_ns);
    if (values.empty()) continue;
    v1::Metadata& entry = kept.emplace_back();
    entry.set_key(key);
    entry.set_value(NumberText(Median(values)));
    entry.set_time_ns(last_end);
  }
  *metadata = std::move(kept);
}

}  // namespace flopscope::daemon
