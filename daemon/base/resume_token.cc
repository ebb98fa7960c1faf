// Resume tokens: generated from getrandom, stored as SHA-256 digests, compared in constant time.
#include "daemon/base/resume_token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace flopscope::daemon {

absl::StatusOr<std::string> NewResumeToken() {
  unsigned char bytes[32];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot draw a session token (getrandom): ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

std::string ResumeTokenDigest(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

std::string SerializeHelloForStorage(const v1::SessionHello& hello) {
  if (hello.resume_token().empty()) return hello.SerializeAsString();
  v1::SessionHello stored = hello;
  stored.clear_resume_token();
  return stored.SerializeAsString();
}

bool SameDigest(absl::string_view a, absl::string_view b) {
  // Digests have a fixed length, so the length check reveals nothing about a token.
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace flopscope::daemon
