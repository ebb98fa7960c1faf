// nvtx_minimal: a fixed, tiny NVTX tree for flopscope's integration tests. With --repeat R
// (default 1) the whole sequence below runs R times on the main thread; nothing else is emitted.
//
//   outer                 default domain, nvtxRangePushA/Pop          R calls
//     inner               default domain, nvtxRangePushA/Pop, 3×      3·R calls
//   registered            default domain, nvtxRangePushEx/Pop with a  R calls
//                         string registered by nvtxDomainRegisterStringA(NULL, "registered")
//   startend              default domain, nvtxRangeStartA/End, opened  R calls (kind START_END)
//                         and closed with no push range open
//   mark "nvtx_minimal"   default domain nvtxMarkA: not metadata, ignored by flopscope
//
// Module paths: outer (R), outer/inner (3·R), registered (R), startend (R).
// Before the first repetition, one "flopscope"-domain mark: "params outer=42" (metadata:
// params of outer = 42). No step or phase ranges. Prints "nvtx_minimal: R repetitions".
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kInnerPerOuter = 3;

void AnnounceParams() {
  nvtxDomainHandle_t flopscope = nvtxDomainCreateA("flopscope");
  nvtxEventAttributes_t mark = {};
  mark.version = NVTX_VERSION;
  mark.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  mark.messageType = NVTX_MESSAGE_TYPE_ASCII;
  mark.message.ascii = "params outer=42";
  nvtxDomainMarkEx(flopscope, &mark);
}

void EmitOnce(nvtxStringHandle_t registered) {
  nvtxRangePushA("outer");
  for (int i = 0; i < kInnerPerOuter; ++i) {
    nvtxRangePushA("inner");
    nvtxRangePop();
  }
  nvtxRangePop();

  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = registered;
  nvtxRangePushEx(&attributes);
  nvtxRangePop();

  const nvtxRangeId_t range = nvtxRangeStartA("startend");
  nvtxRangeEnd(range);

  nvtxMarkA("nvtx_minimal");
}

// --repeat R or --repeat=R; anything else is a usage error.
bool ParseRepeat(int argc, char** argv, int* repeat) {
  for (int i = 1; i < argc; ++i) {
    const char* value = nullptr;
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      value = argv[++i];
    } else if (std::strncmp(argv[i], "--repeat=", 9) == 0) {
      value = argv[i] + 9;
    } else {
      return false;
    }
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || parsed < 1 || parsed > 1'000'000) return false;
    *repeat = static_cast<int>(parsed);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 1;
  if (!ParseRepeat(argc, argv, &repeat)) {
    std::fprintf(stderr, "usage: nvtx_minimal [--repeat R]   (R from 1 to 1000000)\n");
    return 2;
  }
  AnnounceParams();
  const nvtxStringHandle_t registered = nvtxDomainRegisterStringA(nullptr, "registered");
  for (int i = 0; i < repeat; ++i) EmitOnce(registered);
  std::printf("nvtx_minimal: %d repetitions\n", repeat);
  return 0;
}
