#pragma once

#include <string_view>

namespace flopscope {

// The metadata channel's per-module keys (docs/marks.md): "<prefix><module path>", one value per
// module, the last announced winning. The client draws them in the module tree, not in the
// report's header; the daemon sends each (key, value) once over a job's ranks when every rank
// announced the same value.
//   module, class, params, extra_repr, range_module, flops, macs, estimated_flops, estimated_macs,
//   params_shard, deepspeed_differs, compiled
bool IsPerModuleKey(std::string_view key);

// The injector's own key in a session's final batch when the process was ended by a signal after
// its records were drained (injector/sigterm_drain.h): "SIGTERM" or "SIGINT".
inline constexpr std::string_view kEndSignalKey = "process.end_signal";

// The daemon's row in a session that never delivered its final batch although its process began
// a drain for a signal (the made-counts file names it: common/made_counts_page.h): the drain was
// cut short (its bound ran out, the transport had not started, a second signal came). "SIGTERM"
// or "SIGINT". Views name the signal instead of guessing a kill (daemon/store/rank_store.h).
inline constexpr std::string_view kEndSignalCutShortKey = "process.end_signal_cut_short";

}  // namespace flopscope
