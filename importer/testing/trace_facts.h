#pragma once

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "importer/testing/shared_data.h"

namespace flopscope::importer::testing {

// Facts about a Kineto trace computed the plain way, for expected values in tests: the whole
// document in memory (WholeTrace), events copied into simple structs, brute-force searches.
// Deliberately shares no code with the importer beyond simdjson itself.
class TraceFacts {
 public:
  struct Event {
    std::string cat;
    std::string name;
    std::string tid;  // the tid's JSON text: 123 and "123" stay apart
    int64_t ts_ns = 0;
    int64_t dur_ns = 0;
    std::optional<int64_t> correlation;
    std::optional<int64_t> python_id;
    std::optional<int64_t> python_parent_id;
    std::map<std::string, double> args;  // the numeric ones
  };

  explicit TraceFacts(const std::string& path);
  bool ok() const { return trace_.ok(); }
  simdjson::dom::element root() const { return trace_.root(); }

  const std::vector<Event>& events() const { return events_; }
  // Complete ("X") kernel events in file order.
  const std::vector<Event>& kernels() const { return kernels_; }
  std::vector<const Event*> modules() const;

  uint64_t CountCategory(std::initializer_list<std::string> categories) const;
  // Annotations (user_annotation, or legacy Operator) named `text`, or starting with it.
  uint64_t CountAnnotationsNamed(const std::string& text, bool prefix) const;

  // The module range (nn.Module or module-like annotation) that was innermost on the kernel's
  // launching thread at launch; nullptr when the launch is missing or no module was open.
  const Event* InnermostModuleAtLaunch(const Event& kernel) const;
  // "Qwen2Model_0/Qwen2DecoderLayer_0/...": nn.Module ancestors by Python parent id; for an
  // annotation, its name.
  std::string ModulePathByParentIds(const Event& module) const;

  std::optional<int64_t> DistributedInt(const char* key) const;
  simdjson::dom::element Device(size_t index) const;

 private:
  bool IsModuleRange(const Event& event) const;

  WholeTrace trace_;
  std::vector<Event> events_;
  std::vector<Event> kernels_;
  std::map<int64_t, const Event*> launches_;      // by correlation
  std::map<int64_t, const Event*> python_by_id_;  // python_function by Python id
};

}  // namespace flopscope::importer::testing
