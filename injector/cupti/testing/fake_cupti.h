#pragma once

#include <cupti.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "injector/cupti/cupti_api.h"

namespace flopscope::injector::cupti::testing {

// A scripted CUPTI for tests: a CuptiApi whose functions answer from this object (one at a time
// per process, installed by the constructor) and record what the tracer asked. Record parsing
// and result strings are the real libcupti's.
class FakeCupti {
 public:
  FakeCupti();
  ~FakeCupti();
  FakeCupti(const FakeCupti&) = delete;
  FakeCupti& operator=(const FakeCupti&) = delete;

  CuptiApi Api() const;

  // Scripted answers.
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  std::string holder;  // written to oldSubscriberName when subscribing fails
  CUptiResult activity_enable_result = CUPTI_SUCCESS;
  std::map<std::pair<int, uint32_t>, std::string> callback_names;  // (domain, cbid) -> name
  std::map<const void*, uint64_t> graph_node_ids;                  // CUgraphNode -> id
  std::map<const void*, uint32_t> context_devices;                 // CUcontext -> device
  std::map<uint32_t, std::string> chips;                           // device -> chip name
  size_t dropped_per_buffer = 0;
  std::function<void(uint32_t flag)> on_flush;  // e.g. deliver a buffer, as CUPTI would

  // What the tracer did.
  bool subscribed = false;
  bool unsubscribed = false;
  bool finalized = false;
  bool timestamp_callback_registered = false;
  std::set<std::pair<int, uint32_t>> enabled_callbacks;
  std::set<int> enabled_kinds;
  std::vector<uint32_t> flushes;  // flags of each cuptiActivityFlushAll
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
};

}  // namespace flopscope::injector::cupti::testing
