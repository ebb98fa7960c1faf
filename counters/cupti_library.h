#pragma once

#include <cstdint>
#include <string>

namespace flopscope::counters {

// libcupti as this process opened it. The handle is never dlclose'd: CUPTI keeps threads and
// callbacks into the library for the life of the process, so unloading it would leave them
// pointing at unmapped code.
struct CuptiLibrary {
  void* handle = nullptr;
  std::string path;      // the file the dynamic linker mapped (else the name it was opened by)
  uint32_t version = 0;  // cuptiGetVersion
};

// The records and parameter structs flopscope uses are CUDA 13's layouts (CUPTI_API_VERSION
// 130001); an older libcupti reads and writes older, shorter ones.
inline constexpr uint32_t kMinimumCuptiVersion = 130000;

// Opens libcupti with RTLD_NOW | RTLD_LOCAL and reads its version. Search order: `explicit_path`
// (FLOPSCOPE_CUPTI_PATH) alone when it is given; else the copy already loaded in the process or
// found by the dynamic linker ("libcupti.so.13"); else the toolkit's copy this build was
// configured with. False with `error` set (one sentence naming what was tried and what to do)
// when none opens, it lacks cuptiGetVersion, or its version is older than kMinimumCuptiVersion.
// Safe to call more than once: dlopen of a loaded library returns the same handle.
bool OpenCuptiLibrary(const std::string& explicit_path, CuptiLibrary* out, std::string* error);

}  // namespace flopscope::counters
