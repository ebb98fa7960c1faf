#pragma once

#include <string_view>

namespace flopscope {

// The metadata channel's per-module keys (docs/marks.md): "<prefix><module path>", one value per
// module, the last announced winning. The client draws them in the module tree, not in the
// report's header; the daemon sends each (key, value) once over a job's ranks when every rank
// announced the same value.
//   module, class, params, extra_repr, range_module, flops, macs, estimated_flops, estimated_macs
bool IsPerModuleKey(std::string_view key);

// The injector's own key in a session's final batch when the process was ended by a signal after
// its records were drained (injector/sigterm_drain.h): "SIGTERM" or "SIGINT".
inline constexpr std::string_view kEndSignalKey = "process.end_signal";

}  // namespace flopscope
