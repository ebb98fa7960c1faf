// The open-file limit and the streams it affords (open_file_limit.h).
#include "daemon/server/open_file_limit.h"

#include <algorithm>

namespace flopscope::daemon {

rlim_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  const rlim_t most = static_cast<rlim_t>(kMostStreams) * kDescriptorsPerStream * 2;
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? most : std::min(limit.rlim_max, most);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur;
}

int StreamsForOpenFiles(rlim_t open_files) {
  if (open_files == RLIM_INFINITY) return kMostStreams;
  const rlim_t streams = open_files / 2 / kDescriptorsPerStream;
  return static_cast<int>(
      std::clamp<rlim_t>(streams, static_cast<rlim_t>(kFewestStreams), kMostStreams));
}

int DefaultMaxStreams() { return StreamsForOpenFiles(RaiseOpenFileLimit()); }

}  // namespace flopscope::daemon
