#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "flopscope/v1/records.pb.h"

namespace flopscope::daemon {

// Session resume tokens (docs/architecture.md, "Access model"): a session is resumed only by a
// hello that presents the secret its first hello carried or was given in the Welcome, never by
// its id alone. The catalog keeps only a digest; tokens are never logged.

// Longest token a hello may carry (ours are 64 hex digits).
inline constexpr size_t kMaxResumeTokenBytes = 256;

// 32 bytes from the kernel's CSPRNG (getrandom), as 64 lowercase hex digits.
absl::StatusOr<std::string> NewResumeToken();

// SHA-256 of the token (32 raw bytes): what the catalog stores.
std::string ResumeTokenDigest(absl::string_view token);

// Constant-time comparison of two digests (their contents never steer a branch).
bool SameDigest(absl::string_view a, absl::string_view b);

// The hello as stored (catalog, rank file): serialized without its resume token, whoever
// passes it in (the Collector strips it first; other paths, such as spool collection, need not).
std::string SerializeHelloForStorage(const v1::SessionHello& hello);

}  // namespace flopscope::daemon
