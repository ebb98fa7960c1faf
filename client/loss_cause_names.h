#pragma once

#include <string>

#include "flopscope/v1/records.pb.h"

namespace flopscope::client {

// The short name reports use for a loss cause: LOSS_CAUSE_BUFFER_FULL -> "buffer_full"; a value
// this client does not know (a newer injector) -> "cause_<number>".
std::string LossCauseName(int cause);

// What a person should make of it, one short phrase ("the injector's buffer was full").
std::string LossCauseDescription(int cause);

}  // namespace flopscope::client
