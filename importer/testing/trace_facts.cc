#include "importer/testing/trace_facts.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace flopscope::importer::testing {
namespace {

std::string Text(simdjson::dom::element value) {
  std::string_view text;
  if (value.get_string().get(text) == simdjson::SUCCESS) return std::string(text);
  return "";
}

std::optional<int64_t> Int(simdjson::dom::element object, const char* key) {
  simdjson::dom::element value;
  if (object[key].get(value) != simdjson::SUCCESS) return std::nullopt;
  int64_t i = 0;
  if (value.get_int64().get(i) == simdjson::SUCCESS) return i;
  double d = 0;
  if (value.get_double().get(d) == simdjson::SUCCESS) return static_cast<int64_t>(d);
  return std::nullopt;
}

int64_t MicrosToNanos(simdjson::dom::element object, const char* key) {
  double micros = 0;
  if (object[key].get_double().get(micros) != simdjson::SUCCESS) return 0;
  return std::llround(micros * 1000.0);
}

bool IsStepName(const std::string& name) {
  const std::string prefix = "ProfilerStep#";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) return false;
  return std::all_of(name.begin() + prefix.size(), name.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "## Forward ##" -> "forward".
std::string Undecorated(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c != '#') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  const size_t first = out.find_first_not_of(' ');
  const size_t last = out.find_last_not_of(' ');
  return first == std::string::npos ? "" : out.substr(first, last - first + 1);
}

bool Contains(const TraceFacts::Event& outer, int64_t t) {
  return outer.ts_ns <= t && t <= outer.ts_ns + outer.dur_ns;
}

}  // namespace

TraceFacts::TraceFacts(const std::string& path) : trace_(path) {
  if (!trace_.ok()) return;
  for (simdjson::dom::element raw : trace_.events()) {
    if (Text(raw["ph"]) != "X") continue;
    Event event;
    event.cat = Text(raw["cat"]);
    event.name = Text(raw["name"]);
    event.tid = simdjson::minify(raw["tid"].value());
    event.ts_ns = MicrosToNanos(raw, "ts");
    event.dur_ns = MicrosToNanos(raw, "dur");
    simdjson::dom::object args;
    if (raw["args"].get_object().get(args) == simdjson::SUCCESS) {
      event.correlation = Int(raw["args"].value(), "correlation");
      event.python_id = Int(raw["args"].value(), "Python id");
      event.python_parent_id = Int(raw["args"].value(), "Python parent id");
      for (auto field : args) {
        double number = 0;
        if (field.value.get_double().get(number) == simdjson::SUCCESS) {
          event.args[std::string(field.key)] = number;
        }
      }
    }
    events_.push_back(std::move(event));
  }
  for (const Event& event : events_) {
    if (event.cat == "kernel" || event.cat == "Kernel") kernels_.push_back(event);
    const bool runtime =
        event.cat == "cuda_runtime" || event.cat == "cuda_driver" || event.cat == "Runtime";
    if (runtime && event.correlation.has_value()) launches_[*event.correlation] = &event;
    if (event.cat == "python_function" && event.python_id.has_value()) {
      python_by_id_[*event.python_id] = &event;
    }
  }
}

std::vector<const TraceFacts::Event*> TraceFacts::modules() const {
  std::vector<const Event*> modules;
  for (const Event& event : events_) {
    if (event.cat == "python_function" && event.name.rfind("nn.Module: ", 0) == 0) {
      modules.push_back(&event);
    }
  }
  return modules;
}

uint64_t TraceFacts::CountCategory(std::initializer_list<std::string> categories) const {
  return std::count_if(events_.begin(), events_.end(), [&categories](const Event& event) {
    return std::find(categories.begin(), categories.end(), event.cat) != categories.end();
  });
}

uint64_t TraceFacts::CountAnnotationsNamed(const std::string& text, bool prefix) const {
  return std::count_if(events_.begin(), events_.end(), [&](const Event& event) {
    if (event.cat != "user_annotation" && event.cat != "Operator") return false;
    return prefix ? event.name.rfind(text, 0) == 0 : event.name == text;
  });
}

bool TraceFacts::IsModuleRange(const Event& event) const {
  if (event.cat == "python_function") return event.name.rfind("nn.Module: ", 0) == 0;
  if (event.cat != "user_annotation") return false;
  if (IsStepName(event.name)) return false;
  const std::string bare = Undecorated(event.name);
  if (bare == "forward" || bare == "backward" || bare == "optimizer") return false;
  if (event.name.rfind("Optimizer.step#", 0) == 0) {
    // A phase of its own, unless a user's optimizer annotation already encloses it.
    return std::any_of(events_.begin(), events_.end(), [&event](const Event& outer) {
      return outer.cat == "user_annotation" && outer.tid == event.tid &&
             Undecorated(outer.name) == "optimizer" && outer.ts_ns <= event.ts_ns &&
             event.ts_ns + event.dur_ns <= outer.ts_ns + outer.dur_ns;
    });
  }
  return true;
}

const TraceFacts::Event* TraceFacts::InnermostModuleAtLaunch(const Event& kernel) const {
  if (!kernel.correlation.has_value()) return nullptr;
  const auto launch = launches_.find(*kernel.correlation);
  if (launch == launches_.end()) return nullptr;
  const Event& at = *launch->second;
  const Event* best = nullptr;
  for (const Event& event : events_) {
    if (event.tid != at.tid || !Contains(event, at.ts_ns) || !IsModuleRange(event)) continue;
    if (best == nullptr || event.ts_ns > best->ts_ns ||
        (event.ts_ns == best->ts_ns && event.dur_ns < best->dur_ns)) {
      best = &event;
    }
  }
  return best;
}

std::string TraceFacts::ModulePathByParentIds(const Event& module) const {
  if (module.cat != "python_function") return module.name;
  std::vector<std::string> names;
  const Event* current = &module;
  while (current != nullptr) {
    if (current->name.rfind("nn.Module: ", 0) == 0) names.push_back(current->name.substr(11));
    if (!current->python_parent_id.has_value()) break;
    const auto parent = python_by_id_.find(*current->python_parent_id);
    current = parent == python_by_id_.end() ? nullptr : parent->second;
  }
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path += "/";
    path += *it;
  }
  return path;
}

std::optional<int64_t> TraceFacts::DistributedInt(const char* key) const {
  simdjson::dom::element info;
  if (root()["distributedInfo"].get(info) != simdjson::SUCCESS) return std::nullopt;
  return Int(info, key);
}

simdjson::dom::element TraceFacts::Device(size_t index) const {
  return root()["deviceProperties"].at(index).value();
}

}  // namespace flopscope::importer::testing
