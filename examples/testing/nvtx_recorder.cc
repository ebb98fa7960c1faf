// A test-only NVTX tool (loaded through NVTX_INJECTION64_PATH) that records what an example
// program emits, so the examples' documented trees are checked without flopscope's injector.
// At exit it writes $NVTX_RECORDER_OUT, one tab-separated record per line:
//   range <domain> <path> <count>    push/pop ranges; path = names joined by '/', built from a
//                                    per-thread stack kept per domain ("" = default domain)
//   startend <domain> <name> <count> start/end ranges
//   mark <domain> <message> <count>
//   main_push <path>                 default-domain pushes of the main thread, in order
//   unmatched_pop <domain> <count>   pops with an empty stack
// Lines of each kind come in first-seen order.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Domain {
  std::string name;
};

// Counts keyed by (kind, domain, text), remembering first-seen order.
class Recorder {
 public:
  void Count(const std::string& kind, const std::string& domain, const std::string& text) {
    // NVTX calls arrive from every thread of the program.
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string key = kind + "\t" + domain + "\t" + text;
    auto [it, inserted] = counts_.emplace(key, 0);
    if (inserted) order_.push_back(key);
    ++it->second;
  }
  void MainPush(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    main_pushes_.push_back(path);
  }
  void Write() {
    const char* path = std::getenv("NVTX_RECORDER_OUT");
    if (path == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    FILE* out = std::fopen(path, "w");
    if (out == nullptr) return;
    for (const std::string& key : order_) std::fprintf(out, "%s\t%d\n", key.c_str(), counts_[key]);
    for (const std::string& push : main_pushes_) std::fprintf(out, "main_push\t%s\n", push.c_str());
    std::fclose(out);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> counts_;
  std::vector<std::string> order_;
  std::vector<std::string> main_pushes_;
};

Recorder& TheRecorder() {
  static Recorder* recorder = new Recorder();  // never destroyed: threads may still call in
  return *recorder;
}

std::string DomainName(nvtxDomainHandle_t domain) {
  return domain == nullptr ? "" : reinterpret_cast<Domain*>(domain)->name;
}

std::string Message(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr) return "";
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return attributes->message.ascii != nullptr ? attributes->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return *reinterpret_cast<const std::string*>(attributes->message.registered);
    default:
      return "<unsupported message type>";
  }
}

// Open push/pop ranges of this thread, one stack per domain name.
thread_local std::map<std::string, std::vector<std::string>> open_ranges;

bool IsMainThread() { return syscall(SYS_gettid) == getpid(); }

int Push(const std::string& domain, const std::string& name) {
  std::vector<std::string>& stack = open_ranges[domain];
  std::string path = stack.empty() ? name : stack.back() + "/" + name;
  TheRecorder().Count("range", domain, path);
  if (domain.empty() && IsMainThread()) TheRecorder().MainPush(path);
  stack.push_back(std::move(path));
  return static_cast<int>(stack.size()) - 1;
}

int Pop(const std::string& domain) {
  std::vector<std::string>& stack = open_ranges[domain];
  if (stack.empty()) {
    TheRecorder().Count("unmatched_pop", domain, "");
    return -1;
  }
  stack.pop_back();
  return static_cast<int>(stack.size());
}

// --- the NVTX entry points this tool implements (others stay no-ops) ---
void MarkA(const char* message) { TheRecorder().Count("mark", "", message); }
void MarkEx(const nvtxEventAttributes_t* attributes) {
  TheRecorder().Count("mark", "", Message(attributes));
}
int RangePushA(const char* name) { return Push("", name); }
int RangePushEx(const nvtxEventAttributes_t* attributes) { return Push("", Message(attributes)); }
int RangePop() { return Pop(""); }
nvtxRangeId_t RangeStartA(const char* name) {
  TheRecorder().Count("startend", "", name);
  return 1;
}
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* attributes) {
  TheRecorder().Count("startend", "", Message(attributes));
  return 1;
}
void RangeEnd(nvtxRangeId_t) {}

void DomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  TheRecorder().Count("mark", DomainName(domain), Message(attributes));
}
int DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  return Push(DomainName(domain), Message(attributes));
}
int DomainRangePop(nvtxDomainHandle_t domain) { return Pop(DomainName(domain)); }
nvtxDomainHandle_t DomainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name});
}
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t, const char* text) {
  return reinterpret_cast<nvtxStringHandle_t>(new std::string(text));
}

template <typename Function>
void Install(NvtxFunctionTable table, unsigned size, unsigned id, Function function) {
  if (id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core = nullptr;
  unsigned core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    return 0;
  }
  Install(core, core_size, NVTX_CBID_CORE_MarkA, MarkA);
  Install(core, core_size, NVTX_CBID_CORE_MarkEx, MarkEx);
  Install(core, core_size, NVTX_CBID_CORE_RangePushA, RangePushA);
  Install(core, core_size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  Install(core, core_size, NVTX_CBID_CORE_RangePop, RangePop);
  Install(core, core_size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  Install(core, core_size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  Install(core, core_size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  Install(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
  Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
  Install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
  Install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
  Install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
  std::atexit([] { TheRecorder().Write(); });
  return 1;
}
