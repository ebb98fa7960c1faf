#pragma once

#define NVTX_NO_IMPL  // the tool side: types only, no NVTX instance of our own
#include <nvtx3/nvToolsExt.h>

namespace flopscope::injector {

// Writes the tool's callbacks into the function table of ONE NVTX instance. Each DSO that
// includes the header-only NVTX is its own instance and calls InitializeInjectionNvtx2 on its
// first NVTX call, so this runs once per instance; all instances share the session's state.
// Returns 1 on success (the value InitializeInjectionNvtx2 must return), 0 otherwise.
int InstallNvtxCallbacks(NvtxGetExportTableFunc_t get_export_table) noexcept;

}  // namespace flopscope::injector
