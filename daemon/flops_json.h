#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// The tensor FLOPs of one kernel as the JSON object stored in kernel_flops.tensor:
// {"<source>": <flops>, ...}, sources in the order received, numbers with full precision, so
// that plain SQL (json_extract) can read them.
std::string TensorFlopsJson(const v1::FlopCounters& flops);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

}  // namespace flopscope::daemon
