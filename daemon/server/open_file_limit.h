#pragma once

// How many Collector streams the daemon may hold, from the open files it may have: since the
// Collector serves streams on gRPC's callback API (issue 33), a stream holds no thread, so its
// cost is its descriptors: the connection's socket and its rank file's database, WAL and WAL
// index (RankStore, SQLite in WAL mode). The other half of the open-file limit is the query
// side's (ReaderPool::CapacityForFileLimit). An aggregator of 16 384 ranks holds 16 384 forwarded
// streams, which the shell's usual soft limit of 1024 files would refuse, so the daemon first
// raises its soft limit to the hard one, as a server may without privileges.

#include <sys/resource.h>

namespace flopscope::daemon {

// Descriptors one stream holds (above).
inline constexpr rlim_t kDescriptorsPerStream = 4;
// The fewest and the most streams the default allows.
inline constexpr int kFewestStreams = 64;
inline constexpr int kMostStreams = 1 << 20;

// Raises this process's soft RLIMIT_NOFILE to its hard limit (at most kMostStreams *
// kDescriptorsPerStream * 2 files); returns the soft limit in effect after it, RLIM_INFINITY when
// unlimited.
rlim_t RaiseOpenFileLimit();

// The streams a soft open-file limit of `open_files` affords: half of it at kDescriptorsPerStream
// each, within [kFewestStreams, kMostStreams].
int StreamsForOpenFiles(rlim_t open_files);

// --max-streams when not given: RaiseOpenFileLimit, then StreamsForOpenFiles.
int DefaultMaxStreams();

}  // namespace flopscope::daemon
