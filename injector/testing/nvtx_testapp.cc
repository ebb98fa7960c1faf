// An NVTX application for the injector's tests: `flopscope_nvtx_testapp <scenario>`. It includes
// the real NVTX v3 headers, so the injector is reached exactly as in a training job (through
// NVTX_INJECTION64_PATH, set by the injector's constructor under LD_PRELOAD). Scenarios print a
// line `stats ...` with the injector's test counters where that helps the test.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "injector/test_hooks.h"

extern "C" void testlib_step_begin();
extern "C" void testlib_step_end();
extern "C" void testlib_module(const char* name);

namespace {

nvtxEventAttributes_t Attributes() {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attributes;
}

nvtxEventAttributes_t Ascii(const char* text) {
  nvtxEventAttributes_t attributes = Attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = text;
  return attributes;
}

void PrintStats() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  void* injector = path == nullptr ? nullptr : dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  auto* get_stats = injector == nullptr ? nullptr
                                        : reinterpret_cast<flopscope_test_get_stats_fn>(
                                              dlsym(injector, "flopscope_test_get_stats"));
  if (get_stats == nullptr) {
    std::printf("stats unavailable\n");
    return;
  }
  flopscope_test_stats stats;
  get_stats(&stats);
  std::printf("stats session=%llu buffered=%llu nvtx_inits=%llu paths=%llu\n",
              static_cast<unsigned long long>(stats.session_started),
              static_cast<unsigned long long>(stats.records_buffered),
              static_cast<unsigned long long>(stats.nvtx_inits),
              static_cast<unsigned long long>(stats.paths));
}

// Model/layer.0/attn through every message flavour, plus one pop too many.
void Nested() {
  nvtxRangePushA("Model");
  nvtxRangePushW(L"layer.0");
  nvtxEventAttributes_t attn = Ascii("attn");
  nvtxRangePushEx(&attn);
  nvtxRangePop();
  nvtxEventAttributes_t wide = Attributes();
  wide.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  wide.message.unicode = L"m\u00e9lange";
  nvtxRangePushEx(&wide);
  nvtxRangePop();
  nvtxStringHandle_t mlp = nvtxDomainRegisterStringA(nullptr, "mlp");
  nvtxEventAttributes_t registered = Attributes();
  registered.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  registered.message.registered = mlp;
  nvtxRangePushEx(&registered);
  nvtxRangePop();
  nvtxRangePop();  // layer.0
  nvtxRangePop();  // Model
  nvtxRangePop();  // unmatched
  nvtxMarkA("ignored mark");
  nvtxNameOsThreadA(0, "main");
  nvtxNameCategoryA(1, "cat");
  std::printf("job output unchanged\n");
}

// Steps and phases in the flopscope domain (from two NVTX instances), module ranges, marks.
void Domains() {
  nvtxDomainHandle_t flopscope = nvtxDomainCreateA("flopscope");
  nvtxDomainHandle_t other = nvtxDomainCreateW(L"other");
  testlib_step_begin();  // the library's NVTX instance: "step"
  nvtxEventAttributes_t forward = Ascii("forward");
  nvtxDomainRangePushEx(flopscope, &forward);  // the app's instance: step/forward
  nvtxRangePushA("Model");
  testlib_module("Block");  // Model/Block, pushed through the library's instance
  nvtxEventAttributes_t params = Ascii("params Model/Block=1234");
  nvtxDomainMarkEx(flopscope, &params);
  nvtxEventAttributes_t parallel = Ascii("parallel tp=2 pp=1 dp=4");
  nvtxDomainMarkEx(flopscope, &parallel);
  nvtxEventAttributes_t not_metadata = Ascii("just a note");
  nvtxDomainMarkEx(flopscope, &not_metadata);
  nvtxEventAttributes_t elsewhere = Ascii("batch_size=8");
  nvtxDomainMarkEx(other, &elsewhere);
  nvtxEventAttributes_t lib_range = Ascii("io");
  nvtxDomainRangePushEx(other, &lib_range);
  nvtxDomainRangePop(other);
  nvtxRangePop();                 // Model
  nvtxDomainRangePop(flopscope);  // forward
  testlib_step_end();             // step
  nvtxDomainDestroy(other);
  PrintStats();
}

void StartEnd() {
  nvtxRangePushA("Model");
  const nvtxRangeId_t load = nvtxRangeStartA("load");
  nvtxEventAttributes_t wide = Attributes();
  wide.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  wide.message.unicode = L"prefetch";
  const nvtxRangeId_t prefetch = nvtxDomainRangeStartEx(nvtxDomainCreateA("io"), &wide);
  std::thread([&] {
    nvtxRangeEnd(load);
    nvtxDomainRangeEnd(nullptr, prefetch);
  }).join();
  nvtxRangePop();
  nvtxRangeEnd(load);  // already ended
  std::printf("main tid %d\n", static_cast<int>(gettid()));
}

void Threads() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      const std::string worker = "worker" + std::to_string(t);
      nvtxRangePushA(worker.c_str());
      for (int i = 0; i < 1000; ++i) {
        nvtxRangePushA("op");
        nvtxRangePop();
      }
      nvtxRangePop();
    });
  }
  for (auto& thread : threads) thread.join();
  PrintStats();
}

// The child of a fork runs without the injector: no records, no dump, no hang at its exit.
int Fork() {
  nvtxRangePushA("parent_before");
  nvtxRangePop();
  const pid_t child = fork();
  if (child == 0) {
    nvtxRangePushA("child_range");
    nvtxRangePop();
    exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  nvtxRangePushA("parent_after");
  nvtxRangePop();
  std::printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

// exit() from another thread while main still runs; the exit code must be kept.
void ExitFromThread() {
  nvtxRangePushA("main_busy");
  std::thread([] {
    nvtxRangePushA("exiting_thread");
    nvtxRangePop();
    std::fflush(stdout);
    std::exit(3);
  }).detach();
  for (;;) pause();
}

void Unclosed() {
  nvtxRangePushA("never_closed");
  nvtxRangePushA("closed");
  nvtxRangePop();
}

void Many(int count) {
  for (int i = 0; i < count; ++i) {
    nvtxRangePushA("tick");
    nvtxRangePop();
  }
  PrintStats();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s nested|domains|startend|threads|fork|exit_thread|unclosed|"
                 "many <n>|none\n",
                 argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  if (scenario == "nested")
    Nested();
  else if (scenario == "domains")
    Domains();
  else if (scenario == "startend")
    StartEnd();
  else if (scenario == "threads")
    Threads();
  else if (scenario == "fork")
    return Fork();
  else if (scenario == "exit_thread")
    ExitFromThread();
  else if (scenario == "unclosed")
    Unclosed();
  else if (scenario == "many")
    Many(argc > 2 ? std::atoi(argv[2]) : 1000);
  else if (scenario == "none")
    std::printf("no nvtx\n");
  else
    return 2;
  return 0;
}
