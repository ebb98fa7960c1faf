#pragma once

#include <vector>

#include "flopscope/v1/query.pb.h"

namespace flopscope::client::testing {

// A small trace as Query.GetTrace streams it, for the export writers' tests: rank 0, one session
// on thread 11, paths model > layer and the `flopscope` step; a step (instance 1) holding model
// (2) holding layer (3); a kernel with counted FP32 FLOPs launched in layer (key 10, stream 7),
// a memcpy launched in model (key 11) and a kernel launched with no range open (key 12).
// Definitions in the first chunk, records in the second.
std::vector<v1::TraceChunk> SampleTrace();

}  // namespace flopscope::client::testing
