#include "injector/cupti/counter_windows/counter_settings.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "injector/injector_config.h"

namespace flopscope::injector::cupti {
namespace {

constexpr const char* kExpected =
    "expected steps=A, steps=A:B, steps=:B, every=N or every=N,steps=K, optionally with "
    "set=full|cheap";
// Beyond any training run; keeps window arithmetic far from overflow.
constexpr int64_t kMaxStep = int64_t{1} << 40;

bool ParseCount(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > kMaxStep) {
    return false;
  }
  *out = value;
  return true;
}

// The step-range syntax of `flopscope report --steps`, both ends included: "3", "3:4" or ":4"
// (from step 0). "3:" (no end) is refused: a counter window must end (every=N repeats one). The
// old "3-4" is refused with its new spelling, so a launcher script learns the fix at once.
bool ParseStepRange(std::string_view text, int64_t* first, int64_t* last, std::string* why) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    const size_t dash = text.find('-');
    if (dash != std::string_view::npos && dash > 0) {
      *why = "A-B is now written A:B (steps=" + std::string(text.substr(0, dash)) + ":" +
             std::string(text.substr(dash + 1)) + "), as in flopscope report --steps";
      return false;
    }
    if (!ParseCount(text, first)) return false;
    *last = *first;
    return true;
  }
  if (colon + 1 == text.size()) {
    *why = "a counter window must end: steps=A:B, or every=N to repeat one";
    return false;
  }
  *first = 0;
  return (colon == 0 || ParseCount(text.substr(0, colon), first)) &&
         ParseCount(text.substr(colon + 1), last) && *first <= *last;
}

struct Fields {
  std::string_view steps, every, set;
};

bool SplitFields(std::string_view text, Fields* fields, std::string* error) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    std::string_view* slot = key == "steps"   ? &fields->steps
                             : key == "every" ? &fields->every
                             : key == "set"   ? &fields->set
                                              : nullptr;
    if (slot == nullptr || value.empty() || !slot->empty()) {
      *error = "'" + std::string(item) + "' is not understood (or given twice)";
      return false;
    }
    *slot = value;
  }
  return true;
}

}  // namespace

bool ParseCounterWindows(std::string_view text, CounterSettings* settings, std::string* error) {
  Fields fields;
  if (!SplitFields(text, &fields, error)) return false;
  CounterSettings parsed = *settings;
  parsed.windows = EnvWindows{};
  if (!fields.set.empty() && !counters::ParseMetricSetKind(fields.set, &parsed.metric_set)) {
    *error = "set=" + std::string(fields.set) + " is not a metric set (full or cheap)";
    return false;
  }
  if (!fields.every.empty()) {
    EnvWindows& w = parsed.windows;
    if (!ParseCount(fields.every, &w.every) || w.every == 0) {
      *error = "every=" + std::string(fields.every) + " is not a positive step count";
      return false;
    }
    const int64_t most = std::min(w.every, CounterSettings::kMaxWindowSteps);
    if (!fields.steps.empty() &&
        (!ParseCount(fields.steps, &w.count) || w.count == 0 || w.count > most)) {
      *error = "with every=" + std::string(fields.every) + ", steps=" + std::string(fields.steps) +
               " must be a count from 1 to " + std::to_string(most);
      return false;
    }
    w.any = true;
  } else if (!fields.steps.empty()) {
    EnvWindows& w = parsed.windows;
    std::string why;
    if (!ParseStepRange(fields.steps, &w.first, &w.last, &why)) {
      *error = "steps=" + std::string(fields.steps) + ": " +
               (why.empty() ? "not a step A or a range A:B with A <= B" : why);
      return false;
    }
    if (w.last - w.first >= CounterSettings::kMaxWindowSteps) {
      *error = "steps=" + std::string(fields.steps) + " spans more than " +
               std::to_string(CounterSettings::kMaxWindowSteps) + " steps";
      return false;
    }
    w.any = true;
  } else if (fields.set.empty()) {
    *error = "no steps= or every= given";
    return false;
  }  // set= alone: the default set of the daemon's windows, and no window of its own
  parsed.text = std::string(text);
  *settings = std::move(parsed);
  return true;
}

namespace {

uint32_t WorldSize(const EnvLookup& env) {
  for (const char* name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* text = env(name);
    if (text == nullptr || *text == '\0') continue;
    uint32_t size = 0;
    const char* end = text + std::strlen(text);
    const auto [stop, error] = std::from_chars(text, end, size);
    // Malformed: the session identity warns about it; one process is assumed.
    return error == std::errc() && stop == end && size > 0 ? size : 1;
  }
  return 1;
}

}  // namespace

CounterSettings CounterSettingsFromEnvironment(const EnvLookup& env) {
  CounterSettings settings;
  settings.world_size = WorldSize(env);
  settings.max_ranges = static_cast<uint32_t>(
      ReadBoundedEnv(env, "FLOPSCOPE_COUNTER_RANGES", CounterSettings::kMinRanges,
                     CounterSettings::kMaxRanges, settings.max_ranges, &settings.warnings));
  const char* text = env("FLOPSCOPE_COUNTERS");
  if (text == nullptr || *text == '\0') return settings;
  std::string error;
  if (!ParseCounterWindows(text, &settings, &error)) {
    settings.warnings.push_back(std::string("ignoring FLOPSCOPE_COUNTERS='") + text +
                                "': " + error + " (" + kExpected +
                                "); no counter windows from the "
                                "environment");
  }
  return settings;
}

}  // namespace flopscope::injector::cupti
